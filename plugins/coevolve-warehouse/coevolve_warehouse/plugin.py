"""Registers the warehouse environment with CoEvolve (imported at start-up: keep it light)."""

from coevolve_sdk import hookimpl


@hookimpl
def register_environments() -> list[type]:
    from .env import WarehouseEnv

    return [WarehouseEnv]
