"""What every ``coevolve`` command prints through and reads its options with: one console for
results, one for errors, the one way a command fails on bad input (a paragraph saying what to
fix, exit 2, the traceback only with ``--debug``), and ``KEY=VALUE`` options."""

from __future__ import annotations

from typing import Any, NoReturn

import typer
import yaml
from rich.console import Console

__all__ = ["console", "err_console", "fail", "key_values"]

console = Console(soft_wrap=True, highlight=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False)


def fail(e: Exception, debug: bool = False) -> NoReturn:
    """A user-actionable error: one paragraph, exit 2; the traceback only with --debug."""
    if debug:
        err_console.print_exception()
    err_console.print(f"Error: {e}", markup=False)
    raise typer.Exit(2)


def key_values(pairs: list[str], flag: str, example: str) -> dict[str, Any]:
    """``KEY=VALUE`` command-line pairs, each value read as YAML (``5`` is a number, ``[a, b]`` a
    list); a pair without ``=`` is an error naming the flag and an example."""
    from coevolve_sdk.errors import CoEvolveError

    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise CoEvolveError(f"{flag} expects KEY=VALUE (e.g. {example}), got '{pair}'")
        k, v = pair.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out
