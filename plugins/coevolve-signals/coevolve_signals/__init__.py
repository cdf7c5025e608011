"""CoEvolve's three signal detectors: forgetting, boundary and rare.

The names below are loaded on first use, so that importing the plugin module (which the
core's registry does at start-up for every installed plugin) stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'coevolve_signals' has no attribute '{name}'")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
