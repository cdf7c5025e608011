"""The JSON schema of a run config, with the options of every registered component.

A run config names components (``environment: {name: kvstore, options: {...}}``) whose options
are each component's own pydantic ``Options`` model, so the schema of ``RunConfig`` alone says
nothing about them. ``coevolve config schema`` prints this schema: the RunConfig's, plus an
``x-components`` section (JSON Schema ignores keywords it does not know) mapping each kind and
registered name to its package and the JSON schema of its options.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["run_config_schema", "component_option_schemas"]


def component_option_schemas(registry: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """kind -> name -> {"class", "plugin", "distribution", "version", "options"} for every
    registered component; ``options`` is the JSON schema of its Options model (or null)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, table in registry.components.items():
        for name, info in sorted(table.items()):
            model = getattr(info.cls, "Options", None)
            schema = model.model_json_schema() if isinstance(model, type) and issubclass(model, BaseModel) else None
            out.setdefault(kind, {})[name] = {
                "class": f"{info.cls.__module__}.{info.cls.__qualname__}",
                "plugin": info.plugin,
                "distribution": info.distribution,
                "version": info.version,
                "options": schema,
            }
    return out


def run_config_schema(registry: Any | None = None) -> dict[str, Any]:
    """The RunConfig JSON schema with ``x-components`` (the registry's components' options)."""
    from coevolve_sdk.config import config_schema
    from coevolve_sdk.components.registry import get_registry

    schema = dict(config_schema())
    schema["x-components"] = component_option_schemas(registry if registry is not None else get_registry())
    return schema
