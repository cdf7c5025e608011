"""Entry point of the ``appworld`` plugin: imports nothing heavy (and never appworld)."""

from __future__ import annotations

from typing import Any

from coevolve_sdk import hookimpl


@hookimpl
def register_environments() -> list[type]:
    from .env import AppWorldEnv

    return [AppWorldEnv]


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import register

    register(cli)
