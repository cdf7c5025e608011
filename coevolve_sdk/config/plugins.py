"""The plugins a run config asks for: loaded, or the run does not start.

A module named in a run config's ``plugins:`` list is part of the run: if it cannot be
imported the run stops with the import error (issue 16, finding 6: a misspelt module used to
be ignored and the run trained without it). An installed entry-point plugin that failed to
load is reported as a warning that names it: the run may not need it, and if it does, the
component lookup fails with an error that names the failed plugin too.
"""

from __future__ import annotations

from typing import Any, Callable

from coevolve_sdk.config import RunConfig
from coevolve_sdk.errors import PluginError

__all__ = ["load_run_plugins"]


def load_run_plugins(cfg: RunConfig, registry: Any, *, warn: Callable[[str], None]) -> None:
    for mod in cfg.plugins:
        registry.add_module(mod)
        if mod not in registry.plugins:
            failure = next((f for f in registry.failures if f.plugin == mod), None)
            why = failure.error if failure is not None else "it could not be registered"
            raise PluginError(
                f"plugins: '{mod}' (listed in the run config) failed to load: {why}. Check the module path (it must be "
                f"importable from this Python environment, e.g. `python -c 'import {mod}'`), or remove it from plugins:."
            )
    others = [f for f in registry.failures if f.plugin not in cfg.plugins and not getattr(f, "from_build", False)]
    if others:
        names = ", ".join(sorted({f.plugin for f in others}))
        warn(f"warning: installed plugin(s) {names} failed to load; this run goes on without them. "
             + " ".join(f.message() for f in others))
