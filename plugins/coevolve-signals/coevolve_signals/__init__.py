"""CoEvolve's three signal detectors: forgetting, boundary and rare.

The names below are loaded on first use, so that importing the plugin module (which the
core's registry does at start-up for every installed plugin) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevolve_sdk import lazy_exports

__all__ = [
    "StepBatch",
    "Marks",
    "ForgettingDetector",
    "ForgettingOptions",
    "BoundaryDetector",
    "BoundaryOptions",
    "RareDetector",
    "RareOptions",
]

_WHERE = {
    "StepBatch": "batch",
    "Marks": "batch",
    "ForgettingDetector": "forgetting",
    "ForgettingOptions": "forgetting",
    "BoundaryDetector": "boundary",
    "BoundaryOptions": "boundary",
    "RareDetector": "rare",
    "RareOptions": "rare",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .batch import Marks, StepBatch
    from .boundary import BoundaryDetector, BoundaryOptions
    from .forgetting import ForgettingDetector, ForgettingOptions
    from .rare import RareDetector, RareOptions


__getattr__, __dir__ = lazy_exports(__name__, {name: f".{module}" for name, module in _WHERE.items()})
