"""Registers the forgetting, boundary and rare detectors with CoEvolve.

Imported by the core's registry at start-up for every installed plugin, so it imports nothing
heavy itself: the detector modules (and numpy) load when the registry asks for the classes.
"""

from __future__ import annotations

from coevolve_sdk import hookimpl


@hookimpl
def register_signal_detectors() -> list[type]:
    from .boundary import BoundaryDetector
    from .forgetting import ForgettingDetector
    from .rare import RareDetector

    return [ForgettingDetector, BoundaryDetector, RareDetector]
