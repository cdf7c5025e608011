"""``coevolve appworld ...``: set up and inspect AppWorld's isolated runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

app = typer.Typer(help="AppWorld's isolated runtime (its own virtualenv, data and worker processes).", no_args_is_help=True)


@app.command("setup")
def setup(
    venv: Optional[Path] = typer.Option(None, "--venv", help="Where to create AppWorld's virtualenv (default: HOME/venv)."),
    data: Optional[Path] = typer.Option(None, "--data", help="An AppWorld data folder you already have (the real tasks)."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Build the small synthetic task set for offline use."),
    home: Optional[Path] = typer.Option(None, "--home", help="Runtime folder (default: $COEVOLVE_APPWORLD_HOME or ~/.cache/coevolve/appworld-<version>)."),
) -> None:
    """Create AppWorld's virtualenv, install the pinned package, run `appworld install`, and
    point at a data folder (or build the synthetic one). Safe to run again: done stages are skipped."""
    from .runtime import AppWorldRuntimeError, setup_runtime

    if data is not None and synthetic:
        raise typer.BadParameter("use either --data or --synthetic")
    try:
        rt = setup_runtime(home, venv_dir=venv, data=data, synthetic=synthetic, log=lambda s: typer.echo(s, err=True))
    except AppWorldRuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)
    typer.echo(rt.model_dump_json(indent=2))


@app.command("status")
def status(home: Optional[Path] = typer.Option(None, "--home", help="Runtime folder.")) -> None:
    """Show the runtime and the task splits it holds."""
    from .env import AppWorldEnv
    from .runtime import AppWorldRuntimeError, load_runtime

    try:
        rt = load_runtime(home)
    except AppWorldRuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)
    env = AppWorldEnv(home=str(rt.home))
    typer.echo(rt.model_dump_json(indent=2))
    for split in env.splits():
        typer.echo(f"{split}: {len(env.tasks(split))} tasks")


def register(cli: Any) -> None:
    cli.add_typer(app, name="appworld")
