"""Registers the key-value environment with CoEvolve. Kept tiny: it is imported at start-up."""

from coevolve_sdk import hookimpl


@hookimpl
def register_environments() -> list[type]:
    from .env import KVStoreEnv

    return [KVStoreEnv]
