"""Entry point ``bfcl`` of the ``coevolve`` group: registers the BFCL environments."""

from __future__ import annotations

from coevolve_sdk.hooks import hookimpl


@hookimpl
def register_environments() -> list[type]:
    from .env import BFCLMultiTurnEnv

    return [BFCLMultiTurnEnv]
