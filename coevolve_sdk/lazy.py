"""Names of a package resolved on first use (PEP 562), so importing the package stays cheap.

The registry imports every installed plugin's module at start-up, and ``import coevolve_sdk``
must not load torch or the training loop; so the SDK's front door and the plugins that export
names from heavy modules all declare them the same way::

    __getattr__, __dir__ = lazy_exports(__name__, {"BFCLMultiTurnEnv": ".env", "Task": "coevolve_sdk.records"})

A target starting with ``.`` is relative to the package.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for module ``package``: each name of ``where`` is imported from
    its module the first time it is asked for, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # resolve once
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
