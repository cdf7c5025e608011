"""Entry point ``bfcl`` of the ``coevolve`` group: registers the BFCL environments."""

from __future__ import annotations

from coevolve_sdk import hookimpl


@hookimpl
def register_environments() -> list[type]:
    from .env import BFCLMultiTurnEnv

    return [BFCLMultiTurnEnv]


@hookimpl
def register_commands(cli) -> None:  # type: ignore[no-untyped-def]
    import typer

    @cli.command("bfcl-eval")
    def bfcl_eval(
        run_dir: str = typer.Argument(..., help="A run folder whose environment is bfcl-multi-turn."),
        categories: str = typer.Option("base,miss_func,miss_param,long_context", help="Comma-separated BFCL multi-turn categories."),
        split: str = typer.Option("test", help="test (held out from training), train, or all (the 200 official entries)."),
        max_tasks: int = typer.Option(0, help="Entries per category at most (0: all of the split)."),
    ) -> None:
        """Score a run's last checkpoint on BFCL's multi-turn categories, greedily, and print the
        accuracy per category the way BFCL reports it (percent of entries fully correct)."""
        from pathlib import Path

        from rich.console import Console
        from rich.table import Table

        from coevolve_sdk import CoEvolveError, evaluate_run

        console = Console()
        table = Table(title=f"BFCL multi-turn accuracy, split '{split}'")
        for col in ("category", "entries", "accuracy %"):
            table.add_column(col)
        total_ok = total_n = 0.0
        for cat in [c.strip() for c in categories.split(",") if c.strip()]:
            try:
                res = evaluate_run(Path(run_dir), {"environment.options.category": cat}, split=split, max_tasks=max_tasks or None)
            except CoEvolveError as e:
                console.print(f"Error: {e}", markup=False)
                raise typer.Exit(2) from None
            n = res["tasks"]
            total_ok += res["success_rate"] * n
            total_n += n
            table.add_row(cat, str(n), f"{100 * res['success_rate']:.2f}")
        table.add_row("overall", str(int(total_n)), f"{100 * total_ok / max(total_n, 1):.2f}")
        console.print(table)
