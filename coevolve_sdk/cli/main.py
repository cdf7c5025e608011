"""The ``coevolve`` command.

Errors the user can act on (``CoEvolveError``) are printed as one paragraph without a
traceback and exit with status 2; anything else is a bug and keeps its traceback. A run
stopped by a full disk (``DiskFull``) exits with status 75 (``diskspace.EXIT_DISK_FULL``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from coevolve_sdk.storage.diskspace import EXIT_DISK_FULL, DiskFull
from coevolve_sdk.errors import CoEvolveError

app = typer.Typer(help="CoEvolve: RL for tool-use agents with a task pool that evolves with them.", no_args_is_help=True, add_completion=False)
pool_app = typer.Typer(help="Inspect a run's task pool.", no_args_is_help=True)
config_app = typer.Typer(help="Run configuration helpers.", no_args_is_help=True)
app.add_typer(pool_app, name="pool")
app.add_typer(config_app, name="config")
from coevolve_sdk.cli.authoring import check_app, new_app  # noqa: E402  (the plugin authors' commands)

app.add_typer(new_app, name="new")
app.add_typer(check_app, name="check")

from coevolve_sdk.cli.output import console, err_console, fail as _fail, key_values  # noqa: E402


def _parse_sets(sets: list[str]) -> dict[str, Any]:
    return key_values(sets, "--set", "--set training.steps=5")


def _store(run_dir: Path):  # type: ignore[no-untyped-def]
    """The run's store for the reading commands: read-only, no lock (fine while the run writes)."""
    from coevolve_sdk.storage.run_folder import open_store_read_only

    return open_store_read_only(run_dir)


@app.command()
def run(
    config: Optional[Path] = typer.Argument(None, help="YAML run config (see `coevolve config schema`)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the run in this folder from its last checkpoint."),
    set_: list[str] = typer.Option([], "--set", help="Override a config value: --set training.steps=5 (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only print errors and the final summary."),
    restart: bool = typer.Option(False, "--restart", help="Start the run in this folder again from step 0; its old store and "
                                 "checkpoints are moved into RUN_DIR/previous-<time>/ (nothing is deleted)."),
    allow_config_change: bool = typer.Option(False, "--allow-config-change", help="Resume even though settings changed that "
                                             "change what the steps done so far mean (recorded as a config revision)."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error."),
) -> None:
    """Run CoEvolve: train, detect signals, evolve the task pool, evaluate, write a report.

    A run stopped in any way (Ctrl-C, SIGTERM, a kill, a crash, a full disk) continues with
    --resume from its last checkpoint, and ends as if it had never stopped. Exit status: 0 done,
    2 a problem to fix (said without a traceback), 75 the disk is full, 130 Ctrl-C, 143 SIGTERM."""
    from coevolve_sdk.config import load_config
    from coevolve_sdk.run.interrupts import catch_interrupts, interrupt_signal
    from coevolve_sdk.run.loop import CoEvolveLoop
    from coevolve_sdk.run.progress import Progress

    cfg = None
    try:
        if resume is not None:
            cfg_path = resume / "config.yaml"
            if not cfg_path.exists():
                raise CoEvolveError(f"{resume} is not a run folder (no config.yaml). Pass the run_dir of a run started with `coevolve run`.")
            overrides = _parse_sets(set_)
            overrides["run_dir"] = str(resume)
            cfg = load_config(cfg_path, overrides)
        else:
            if config is None:
                raise CoEvolveError("give a config file (`coevolve run examples/bfcl-tiny.yaml`) or --resume RUN_DIR.")
            cfg = load_config(config, _parse_sets(set_))
        progress = Progress(enabled=True, console=console, quiet=quiet)
        with catch_interrupts():
            loop = CoEvolveLoop(cfg, resume=resume is not None, restart=restart, allow_config_change=allow_config_change,
                                progress=progress, source=str(resume / "config.yaml" if resume is not None else config))
            summary = loop.run()
    except DiskFull as e:  # its own exit status: nothing is wrong with the run, it needs room (docs/run-folder.md)
        if debug:
            err_console.print_exception()
        err_console.print(f"Error: {e}", markup=False)
        raise typer.Exit(EXIT_DISK_FULL) from None
    except CoEvolveError as e:
        _fail(e, debug)
        return
    except OSError as e:  # a full disk before the loop runs (the lock file, say)
        from coevolve_sdk.storage.diskspace import disk_full_cause

        code = disk_full_cause(e)
        if code is None or cfg is None:
            raise
        err_console.print(f"Error: {DiskFull('the run folder', e.filename or cfg.run_dir, code, run_dir=cfg.run_dir)}", markup=False)
        raise typer.Exit(EXIT_DISK_FULL) from None
    except KeyboardInterrupt:
        if cfg is None:
            raise typer.Exit(130) from None
        where = resume if resume is not None else cfg.run_dir
        how = "Terminated (SIGTERM)" if interrupt_signal() == "SIGTERM" else "Interrupted"
        err_console.print(f"{how}. The run continues from its last checkpoint, exactly as if it had not stopped: "
                          f"`coevolve run --resume {where}`.", markup=False)
        raise typer.Exit(143 if how.startswith("Terminated") else 130) from None
    if summary:
        console.print_json(json.dumps(summary, default=str))


@app.command()
def plugins(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List loaded plugins, their packages and versions, and the components they register."""
    from coevolve_sdk.components.registry import get_registry

    reg = get_registry()
    rows = []
    for kind, table in reg.components.items():
        for name, info in sorted(table.items()):
            rows.append({"kind": kind, "name": name, "plugin": info.plugin, "distribution": info.distribution, "version": info.version,
                         "class": f"{info.cls.__module__}.{info.cls.__qualname__}"})
    failures = [{"plugin": f.plugin, "distribution": f.distribution, "error": f.error, "hint": f.hint} for f in reg.failures]
    conflicts = [{"kind": k, "name": n, "plugins": [i.plugin for i in infos]} for (k, n), infos in reg.conflicts.items()]
    if as_json:
        plugins_list = [{"name": p.name, "distribution": p.distribution, "version": p.version, "source": p.source} for p in reg.plugins.values()]
        console.print_json(json.dumps({"plugins": plugins_list, "components": rows, "failures": failures, "conflicts": conflicts}))
        return
    t = Table(title="CoEvolve components")
    for col in ("kind", "name", "plugin", "package", "version"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["kind"], r["name"], r["plugin"], r["distribution"] or "-", r["version"] or "-")
    console.print(t)
    for f in reg.failures:
        err_console.print("Plugin failure: " + f.message(), markup=False)
    for c in conflicts:
        err_console.print(f"Name conflict: {c['kind']} '{c['name']}' is registered by {', '.join(c['plugins'])}; disable one with COEVOLVE_DISABLE_PLUGINS.", markup=False)


@pool_app.command("list")
def pool_list(
    run_dir: Path = typer.Argument(..., help="A run folder."),
    origin: Optional[str] = typer.Option(None, help="Only seed, synthetic or benchmark tasks."),
    limit: int = typer.Option(50, help="Show at most this many tasks (0: all)."),
) -> None:
    """List the tasks of a run's pool."""
    try:
        store = _store(run_dir)
    except CoEvolveError as e:
        _fail(e)
        return
    tasks = store.load_tasks(split="train", origin=origin)
    t = Table(title=f"pool of {run_dir} ({len(tasks)} tasks)")
    for col in ("id", "origin", "step", "signal", "actions", "query"):
        t.add_column(col, overflow="fold")
    for task in tasks[: limit or None]:
        lin = task.lineage
        t.add_row(task.id, task.origin, str(lin.step_admitted if lin else 0), (lin.signal_kind or "-") if lin else "-",
                  str(len(task.reference_actions)), task.query[:100])
    console.print(t)


@pool_app.command("show")
def pool_show(run_dir: Path = typer.Argument(...), task_id: str = typer.Argument(..., help="Task id (a unique prefix is enough).")) -> None:
    """Show one task with its full lineage: signal, trajectory, teacher, exploration, validation."""
    try:
        store = _store(run_dir)
        matches = store.find_tasks(task_id)
        if not matches:
            raise CoEvolveError(f"no task '{task_id}' in {run_dir}. `coevolve pool list {run_dir}` shows the ids.")
        if len(matches) > 1 and not any(m.id == task_id for m in matches):
            raise CoEvolveError(f"'{task_id}' matches {len(matches)} tasks ({', '.join(m.id for m in matches[:5])} ...); give more of the id.")
    except CoEvolveError as e:
        _fail(e)
        return
    task = next((m for m in matches if m.id == task_id), matches[0])
    console.rule(f"task {task.id} ({task.origin})")
    console.print(f"query: {task.query}", markup=False)
    console.print("reference actions:", markup=False)
    for i, a in enumerate(task.reference_actions, 1):
        console.print(f"  {i}. {a}", markup=False)
    lin = task.lineage
    if lin is None:
        console.print("lineage: none (a task of the environment's own set)")
        return
    console.rule("lineage")
    console.print(f"admitted at step {lin.step_admitted}; parent task {lin.parent_task_id}", markup=False)
    console.print(f"teacher {lin.teacher}, prompt version {lin.prompt_version}", markup=False)
    if lin.signal_id:
        sig = store.get_signal(lin.signal_id)
        console.print(f"signal {lin.signal_id} ({lin.signal_kind}): {sig.reason if sig else '(not in the store)'}", markup=False)
        if sig is not None and sig.evidence:
            console.print(f"  evidence: {json.dumps(sig.evidence)}", markup=False)
    if lin.trajectory_id:
        tr = store.get_trajectory(lin.trajectory_id)
        if tr is not None:
            console.print(f"trajectory {tr.id} (step {tr.step}, score {tr.score}, pattern '{tr.action_pattern}'):", markup=False)
            for s in tr.steps:
                console.print(f"  > {s.action[:200]}", markup=False)
                console.print(f"    < {s.observation[:200]}", markup=False)
    exp = lin.exploration or {}
    if exp.get("context"):
        console.print("reflection: " + json.dumps(exp["context"])[:800], markup=False)
    if exp.get("triplets"):
        console.print(f"exploration: {exp.get('triplet_count', len(exp['triplets']))} steps", markup=False)
        for tpl in exp["triplets"][:12]:
            console.print(f"  [round {tpl['round']} step {tpl['step']}] {'ok ' if tpl['ok'] else 'ERR'} {tpl['action'][:120]} -> {tpl['observation'][:80]}", markup=False)
    console.print("validation: " + json.dumps(lin.validation)[:800], markup=False)
    usage = store.usage_for_task(task.id)
    if usage:
        u = usage[0]
        console.print(f"teacher usage for its signal: {u['calls']} calls, {u['prompt_tokens'] + u['completion_tokens']} tokens, ${u['cost_usd']:.4f}", markup=False)


@pool_app.command("export")
def pool_export(run_dir: Path = typer.Argument(...), out: Path = typer.Argument(..., help="JSONL file to write.")) -> None:
    """Write every pool task (with lineage) to a JSONL file, one task per line."""
    try:
        store = _store(run_dir)
    except CoEvolveError as e:
        _fail(e)
        return
    tasks = store.load_tasks(split="train")
    tmp = out.with_suffix(out.suffix + ".tmp")
    with open(tmp, "w") as f:
        for t in tasks:
            f.write(t.model_dump_json() + "\n")
    tmp.replace(out)
    console.print(f"wrote {len(tasks)} tasks to {out}")


@config_app.command("schema")
def config_schema_cmd() -> None:
    """Print the JSON schema of a run config, with every registered component's options under
    x-components (kind -> name -> package and options schema)."""
    from coevolve_sdk.config.schema import run_config_schema

    print(json.dumps(run_config_schema(), indent=2))


@config_app.command("check")
def config_check(config: Path = typer.Argument(...)) -> None:
    """Validate a config file and the options of every component it names."""
    from coevolve_sdk.config import load_config, validate_components
    from coevolve_sdk.components.registry import get_registry
    from coevolve_sdk.config.plugins import load_run_plugins

    try:
        cfg = load_config(config)
        reg = get_registry()
        load_run_plugins(cfg, reg, warn=lambda m: err_console.print(m, markup=False))
        validate_components(cfg, reg, source=str(config))
    except CoEvolveError as e:
        _fail(e)
        return
    console.print(f"{config}: valid")


@app.command()
def report(run_dir: Path = typer.Argument(..., help="A run folder.")) -> None:
    """Write RUN_DIR/report.html with plots and the table of admitted tasks."""
    from coevolve_sdk.run.report import write_report

    try:
        _store(run_dir).close()
        path = write_report(run_dir)
    except CoEvolveError as e:
        _fail(e)
        return
    console.print(f"wrote {path}")


@app.command()
def signals(run_dir: Path = typer.Argument(..., help="A run folder.")) -> None:
    """Signals per kind per step, and what each evolution round made of them."""
    try:
        store = _store(run_dir)
    except CoEvolveError as e:
        _fail(e)
        return
    counts = store.signal_counts()
    kinds = sorted({k for _, k, _ in counts})
    t = Table(title="signals per step")
    t.add_column("step")
    for k in kinds:
        t.add_column(k)
    by_step: dict[int, dict[str, int]] = {}
    for s, k, n in counts:
        by_step.setdefault(s, {})[k] = n
    for s in sorted(by_step):
        t.add_row(str(s), *[str(by_step[s].get(k, 0)) for k in kinds])
    console.print(t)
    r = Table(title="evolution rounds")
    for col in ("round", "step", "signals (deduped, by kind)", "proposed", "admitted", "rejected"):
        r.add_column(col)
    for rd in store.rounds():
        r.add_row(str(rd["round"]), str(rd["step"]), ", ".join(f"{k} {v}" for k, v in rd["by_kind"].items()),
                  str(rd["candidates"]), str(rd["accepted"]), str(rd["rejected"]))
    console.print(r)


from coevolve_sdk.run.trajectories import trajectories_cmd  # noqa: E402  (reading a run's episodes; the logic lives there)

app.command("trajectories")(trajectories_cmd)


@app.command("eval")
def eval_cmd(
    run_dir: Path = typer.Argument(..., help="A run folder; its last checkpoint is evaluated."),
    split: Optional[str] = typer.Option(None, help="Split to evaluate (default: the config's eval.split)."),
    max_tasks: Optional[int] = typer.Option(None, help="Evaluate at most this many tasks."),
    set_: list[str] = typer.Option([], "--set", help="Override a config value, e.g. --set environment.options.category=miss_func."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error."),
) -> None:
    """Evaluate a run's newest intact checkpoint greedily on a split and print the accuracy.

    Builds only the environment and the policy (no teacher: its API key need not be set) and
    only reads the run folder, so it works while the run goes on. With --set the environment's
    options can differ from training's, e.g. to score the same checkpoint on each BFCL
    category in turn. Progress goes to stderr (a bar on a terminal), the JSON result to stdout."""
    from coevolve_sdk.run.evaluation import evaluate_run
    from coevolve_sdk.run.progress import Progress

    progress = Progress(enabled=True, console=err_console)
    try:
        res = evaluate_run(run_dir, _parse_sets(set_), split=split, max_tasks=max_tasks, progress=progress.work, log=progress.log)
    except CoEvolveError as e:
        _fail(e, debug)
        return
    finally:
        progress.stop()
    console.print_json(json.dumps(res))


class _ExperimentGroup(typer.core.TyperGroup):
    """`coevolve experiment FILE ...` is short for `coevolve experiment run FILE ...`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


experiment_app = typer.Typer(
    cls=_ExperimentGroup, no_args_is_help=True,
    help="Compare arms (presets and overrides of one base config) over seeds: `coevolve experiment EXPERIMENT.yaml --jobs 2`.",
)
app.add_typer(experiment_app, name="experiment")


def _paired_text(p: dict[str, Any]) -> str:
    """A paired difference as `+0.012 [-0.004, +0.028]` (– without a value)."""
    if p["mean"] is None:
        return "–"
    return f"{p['mean']:+.3f}" + ("" if not p["ci95"] else f" [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]")


def _print_experiment(summary: dict[str, Any], info: dict[str, Any], out: Path) -> None:
    t = Table(title=f"{info['metric']['key']} on '{info['split']}' (95% CI, Student t over seeds)")
    for col in ("arm", "n", "mean", "95% CI", f"paired diff vs {info['baseline']}" if info["baseline"] else ""):
        if col:
            t.add_column(col)
    for name, a in summary.items():
        ci = "–" if not a["ci95"] else f"[{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}]"
        row = [name, str(a["n"]), "–" if a["mean"] is None else f"{a['mean']:.3f}", ci]
        if info["baseline"]:
            p = a.get("paired_vs_baseline")
            row.append("baseline" if p is None else _paired_text(p))
        t.add_row(*row)
    console.print(t)
    for name, against in info.get("comparisons") or []:
        p = summary[name]["paired_vs"][against]
        console.print(f"paired diff {name} − {against}: {_paired_text(p)} (n={p['n']})", markup=False)
    console.print(f"wrote {out / 'summary.json'}, summary-info.json, summary.csv, summary.md and experiment.html", markup=False)


@experiment_app.command("run")
def experiment_run(
    experiment: Path = typer.Argument(..., help="Experiment file (YAML): base config, arms, seeds, metric, baseline."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Runs at a time, each in its own process with cores // jobs torch threads."),
    out_dir: Optional[Path] = typer.Option(None, "--dir", help="Experiment folder (default: the file's `dir`, else runs/experiments/<name>)."),
) -> None:
    """Run every arm × seed that is not finished yet (resuming stopped runs), then summarise."""
    from coevolve_sdk.experiment.runner import run_experiment
    from coevolve_sdk.experiment.summary import summarize
    from coevolve_sdk.experiment.spec import load_experiment

    try:
        exp = load_experiment(experiment, out_dir)
        teacher = exp.checks["teacher_budget"]
        if teacher["equal"] is False or (teacher["equal"] and not teacher.get("budget_set")):
            err_console.print(f"note: teacher budget: {teacher['note']}", markup=False)
        again = f"coevolve experiment {experiment} --jobs {jobs} --dir {exp.out}"
        result = run_experiment(exp, jobs, console, again)
        summary, info = summarize(exp.out)
    except CoEvolveError as e:
        _fail(e)
        return
    except OSError as e:  # the experiment folder's own files (configs, logs) on a full disk
        from coevolve_sdk.storage.diskspace import disk_full_cause

        code = disk_full_cause(e)
        if code is None:
            raise
        err_console.print(f"Error: {DiskFull('the experiment folder', e.filename or out_dir or experiment.parent, code)}"
                          .replace("coevolve run --resume RUN_DIR", again), markup=False)
        raise typer.Exit(EXIT_DISK_FULL) from None
    except KeyboardInterrupt:  # while loading or summarising: no run is running then
        err_console.print("Interrupted. Run the same command again to continue.", markup=False)
        raise typer.Exit(130) from None
    _print_experiment(summary, info, exp.out)
    for label, why in result.failed:
        err_console.print(f"run {label} failed: {why}", markup=False)
    if result.failed or result.stopped:
        err_console.print(f"{len(result.failed)} run(s) failed and {len(result.stopped)} stopped; the summary leaves them out. "
                          f"Rerun to retry them: {again}", markup=False)
    raise typer.Exit(result.exit_code)


@experiment_app.command("summarize")
def experiment_summarize(out_dir: Path = typer.Argument(..., help="An experiment folder (where `coevolve experiment` ran).")) -> None:
    """Aggregate an experiment folder again without running anything (also while it runs)."""
    from coevolve_sdk.experiment.summary import summarize

    try:
        summary, info = summarize(out_dir)
    except CoEvolveError as e:
        _fail(e)
        return
    _print_experiment(summary, info, out_dir)


def main() -> None:
    from coevolve_sdk.components.registry import get_registry

    try:
        get_registry().call_hook("register_commands", cli=app)
    except Exception as e:  # a plugin's command must not take the CLI down; the message names the plugin
        err_console.print(f"warning: a plugin failed to add its commands: {e}", markup=False)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
