"""The commands for plugin authors: ``coevolve new env`` and ``coevolve check env``.

Kept apart from ``cli.py`` (which mounts them) because they serve someone writing a plugin,
not someone running one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from coevolve_sdk.errors import CoEvolveError

__all__ = ["new_app", "check_app"]

new_app = typer.Typer(help="Start a new plugin from a template.", no_args_is_help=True)
check_app = typer.Typer(help="Check that a component keeps the SDK's contracts.", no_args_is_help=True)

from coevolve_sdk.cli.output import console as _out, fail as _fail, key_values  # noqa: E402


@new_app.command("env")
def new_env_cmd(
    name: str = typer.Argument(..., help="The environment's name: lowercase words joined by '-' (e.g. pet-shop)."),
    dest: Path = typer.Option(Path("."), "--dest", help="Folder in which to create coevolve-NAME/."),
    force: bool = typer.Option(False, "--force", help="Write into an existing coevolve-NAME/ folder."),
) -> None:
    """Create coevolve-NAME/: a pip-installable environment plugin on ToolEnv, with a contract
    test and a tiny run config, that installs, passes its test and trains as generated."""
    from coevolve_sdk.authoring.scaffold import new_env

    try:
        root = new_env(name, dest, force=force)
    except CoEvolveError as e:
        _fail(e)
        return
    _out.print(f"created {root}/", markup=False)
    _out.print(
        f"next:\n  pip install -e {root}\n  pytest {root}\n  coevolve check env {name}\n  cd {root} && coevolve run {name}-tiny.yaml",
        markup=False,
    )


@check_app.command("env")
def check_env_cmd(
    name: str = typer.Argument(..., help="A registered environment (`coevolve plugins` lists them)."),
    option: list[str] = typer.Option([], "--option", "-o", help="An environment option KEY=VALUE (repeatable), e.g. -o max_steps=5."),
    max_tasks: Optional[int] = typer.Option(None, "--max-tasks", min=1, help="Check at most this many tasks per split (default: all)."),
    malformed: int = typer.Option(300, "--malformed", min=0, help="Malformed actions to try."),
    split: list[str] = typer.Option([], "--split", help="Splits to check (repeatable; default: train and test)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error."),
) -> None:
    """Check an environment's contracts (tasks, replay, sampling, exploration, determinism,
    malformed actions, gymnasium) and name each broken one with its fix. Exit status 2 when
    a contract fails."""
    from pydantic import ValidationError

    from coevolve_sdk.components.registry import get_registry
    from coevolve_sdk.authoring.check import check_env

    try:
        opts = key_values(option, "--option", "-o max_steps=5")
        cls = get_registry().get("environment", name)
        try:
            parsed = cls.Options.model_validate(opts)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors(include_url=False))
            known = ", ".join(cls.Options.model_fields)
            raise CoEvolveError(f"bad --option for environment '{name}': {problems}. Its options are: {known}.") from None
        report = check_env(cls, parsed, splits=split or None, max_tasks=max_tasks, malformed=malformed, raise_on_failure=False)
    except CoEvolveError as e:
        _fail(e, debug)
        return
    if as_json:
        _out.print_json(json.dumps(report.model_dump() | {"ok": report.ok}))
    else:
        _out.print(str(report), markup=False)
    if not report.ok:
        raise typer.Exit(2)
