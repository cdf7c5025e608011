"""Entry point ``grpo`` of the ``coevolve`` group: registers two policies and one algorithm.

The imported modules only define pydantic options and classes; the heavy libraries are
imported inside the classes when they are built, so listing plugins stays fast.
"""

from __future__ import annotations

from coevolve_sdk import hookimpl


@hookimpl
def register_policies() -> list[type]:
    from .policies import HFPolicy, TinyPolicy

    return [HFPolicy, TinyPolicy]


@hookimpl
def register_algorithms() -> list[type]:
    from .algorithm import GRPO

    return [GRPO]


@hookimpl
def register_commands(cli) -> None:  # type: ignore[no-untyped-def]
    from .models import register_cli

    register_cli(cli)
