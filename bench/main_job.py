"""The main job's wall time, peak memory and where the time goes, phase by phase.

Runs ``coevolve run CONFIG`` in a fresh run folder as ``make demo`` does and prints wall time
and the peak resident memory of the run's process tree against the project's budgets (15
minutes, 3 GB: goals, not timed asserts), and a phase breakdown: seed pool, warm start,
rollouts, update, signals, evolution and in-training evaluation from the run's own ``time/*``
metrics; with ``--profile`` the run goes under cProfile and the parts the metrics do not cover
(start-up: imports and building the components; the evaluations before and after training;
checkpoints; the run store) are read from the profile, with the heaviest functions that are
not the model's own work (outside torch and transformers).

    python bench/main_job.py [--config examples/bfcl-tiny.yaml] [--set key=value ...] [--profile] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import pstats
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUDGET_S, BUDGET_GB = 15 * 60, 3.0
MODEL_PHASES = ("warm start", "rollouts", "update", "evaluation")  # the model's own work (generation, training)
_METRIC_PHASES = {"time/seed_pool": "seed pool", "time/warm_start": "warm start", "time/rollout": "rollouts",
                  "time/update": "update", "time/signals": "signals", "time/evolution_wait": "evolution"}
# evaluation: the seconds each evaluation row records (before, during, after); time/eval would count 'during' twice
# What the profile adds: (phase, file suffix, function, caller file suffix or None = any caller)
_PROFILE_PHASES = [
    ("checkpoint", "coevolve_sdk/run/loop.py", "_checkpoint", None),
    ("store", "coevolve_sdk/storage/store.py", "*", "coevolve_sdk/run/loop.py"),
    ("store", "coevolve_sdk/storage/store.py", "*", "coevolve_sdk/evolution/seed_pool.py"),
    ("store", "coevolve_sdk/storage/store.py", "*", "coevolve_sdk/evolution/scheduler.py"),
]
_MODEL_CODE = ("torch", "transformers", "tokenizers", "safetensors")  # labels of the model's own work in a profile


def _profile_phases(path: Path) -> tuple[dict[str, float], float, list[tuple[float, str]]]:
    """(seconds per phase the metrics miss, seconds inside CoEvolveLoop.run, heaviest non-model functions)."""
    st = pstats.Stats(str(path))
    stats: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    loop_run = 0.0
    for (file, _, name), (_, _, _, ct, callers) in stats.items():
        if file.endswith("coevolve_sdk/run/loop.py") and name == "run":
            loop_run = max(loop_run, ct)
        for phase, suffix, fn, caller in _PROFILE_PHASES:
            if not file.endswith(suffix) or (fn != "*" and name != fn):
                continue
            if caller is None:
                out[phase] = out.get(phase, 0.0) + ct
            else:
                out[phase] = out.get(phase, 0.0) + sum(c[3] for (cf, _, _), c in callers.items() if cf.endswith(caller))
    heavy = []
    for (file, line, name), (_, _, tt, _, _) in stats.items():
        label = f"{file}:{line}({name})" if line else f"{file}({name})" if file != "~" else name
        if any(k in label for k in _MODEL_CODE) or name in ("<built-in method builtins.exec>", "<built-in method marshal.loads>"):
            continue
        heavy.append((tt, label.replace(str(REPO) + "/", "")))
    heavy.sort(reverse=True)
    return out, loop_run, heavy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "examples" / "bfcl-tiny.yaml"))
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--profile", action="store_true", help="run under cProfile and break down the parts outside the time/* metrics")
    ap.add_argument("--top", type=int, default=12, help="heaviest non-model functions to list with --profile")
    ap.add_argument("--keep", default=None, help="keep the run folder (and the profile) here instead of a temporary folder")
    add_json_flag(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        base = Path(args.keep) if args.keep else Path(d)
        base.mkdir(parents=True, exist_ok=True)
        run_dir = base / "run"
        prof = base / "main_job.prof"
        head = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "coevolve_sdk"] if args.profile else \
            [str(Path(sys.executable).parent / "coevolve")]
        cmd = [*head, "run", args.config, "--set", f"run_dir={run_dir}", "-q"]
        for s in args.sets:
            cmd += ["--set", s]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return proc.returncode
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
        con = sqlite3.connect(run_dir / "run.sqlite")
        metrics = dict(con.execute("SELECT key, SUM(value) FROM metrics WHERE key LIKE 'time/%' GROUP BY key").fetchall())
        steps = con.execute("SELECT COUNT(DISTINCT step) FROM metrics WHERE key = 'time/update'").fetchone()[0]
        eval_rows = [json.loads(d) for (d,) in con.execute("SELECT data FROM evals")]
        evals = len(eval_rows)
        synth = con.execute("SELECT COUNT(*) FROM tasks WHERE origin='synthetic'").fetchone()[0]
        con.close()
        store_mb = sum(p.stat().st_size for p in run_dir.glob("run.sqlite*")) / 2**20
        phases: dict[str, float] = {}
        for key, value in metrics.items():
            if key == "time/eval":
                continue
            name = _METRIC_PHASES.get(key, key.split("/", 1)[1])
            phases[name] = phases.get(name, 0.0) + value
        phases["evaluation"] = sum(float(r.get("seconds", 0.0)) for r in eval_rows)
        heavy: list[tuple[float, str]] = []
        if args.profile:
            extra, loop_run, heavy = _profile_phases(prof)
            for name, value in extra.items():
                phases[name] = phases.get(name, 0.0) + value
            phases["start-up (imports, components)"] = max(0.0, wall - loop_run)
    covered = sum(phases.values())
    phases["other"] = max(0.0, wall - covered)
    print(f"{args.config}: {steps} training steps, {evals} evaluations, {synth} synthetic tasks admitted, run store {store_mb:.1f} MB"
          + (" (under cProfile: its overhead inflates Python-heavy phases)" if args.profile else ""))
    print(f"{'phase':<32} {'seconds':>8} {'share':>7}")
    for k, v in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"{k:<32} {v:8.1f} {100 * v / wall:6.1f}%")
    model = sum(phases.get(k, 0.0) for k in MODEL_PHASES)
    outside = 1.0 - model / wall
    print(f"model's own work ({', '.join(MODEL_PHASES)}): {100 * model / wall:.1f}% of wall time; the rest {100 * outside:.1f}%")
    if heavy:
        print(f"heaviest functions outside torch/transformers (own time, profile):")
        for tt, label in heavy[: args.top]:
            print(f"  {tt:8.2f}s  {label}")
    print(f"wall time   {wall:8.1f} s   budget {BUDGET_S} s   ratio {wall / BUDGET_S:.2f}")
    print(f"peak memory {peak_gb:8.2f} GB  budget {BUDGET_GB} GB   ratio {peak_gb / BUDGET_GB:.2f}")
    name = Path(args.config).stem
    write_json(args.json, "main_job", [
        Figure(name=f"main job ({name}) wall time", value=wall, unit="s", baseline=BUDGET_S, baseline_label="budget",
               goal_op="<=", goal=1.0, note="budget holds for the full bfcl-tiny run" if args.sets else ""),
        Figure(name=f"main job ({name}) peak memory", value=peak_gb, unit="GB", baseline=BUDGET_GB, baseline_label="budget",
               goal_op="<=", goal=1.0),
        Figure(name=f"main job ({name}) outside the model's work", value=100 * outside, unit="% of wall",
               goal_on="value", goal_op="<=", goal=10.0, note="start-up, seed pool, signals, evolution, store, checkpoints, other"),
    ], {"config": args.config, "sets": args.sets, "phases": phases, "steps": steps, "store_mb": store_mb})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
