"""The main job's warm start with several torch threads against one.

``make demo`` runs torch on the machine's cores, at most two (``DEMO_THREADS``); the experiment
runner gives each of its parallel runs one. Whether more threads pay off depends on the model:
the tiny warehouse model's matrices are small, and a thread costs synchronisation. This bench
runs the main job's warm start as a run does (``coevolve run CONFIG`` with a fixed number of
updates, no cache, no RL, no evaluation) once with ``--threads`` threads and once with one,
alternating over ``--rounds`` rounds so that load from other jobs hits both sides alike, and
reads each run's own ``warm_start/warm_start_seconds`` metric (start-up excluded).

    python bench/threads.py [--config examples/warehouse-tiny.yaml] [--updates 150] [--rounds 2] [--threads 2] [--json PATH]

Prints the seconds of each side (median over rounds) and the speed-up (goal: >= 1.3x with two
threads on two free cores). Wall-clock figures on a shared machine are noisy; never assert on
them.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def warm_start_seconds(config: Path, updates: int, threads: int) -> float:
    """One run of ``updates`` warm-start updates with ``threads`` torch threads; its own timing."""
    with tempfile.TemporaryDirectory(prefix="coevolve-threads-") as tmp:
        run = Path(tmp) / "run"
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        cmd = [sys.executable, "-m", "coevolve_sdk", "run", str(config), "--set", f"run_dir={run}",
               "--set", f"algorithm.options.warm_start.steps={updates}", "--set", "algorithm.options.warm_start.cache=null",
               "--set", "training.steps=0", "--set", "eval.initial=false", "--set", "eval.before=false"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        if proc.returncode != 0:
            raise SystemExit(f"the run failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        con = sqlite3.connect(run / "run.sqlite")
        try:
            (value,) = con.execute("SELECT value FROM metrics WHERE key = 'warm_start/warm_start_seconds'").fetchone()
        finally:
            con.close()
        return float(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=REPO / "examples" / "warehouse-tiny.yaml")
    ap.add_argument("--updates", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    add_json_flag(ap)
    args = ap.parse_args()
    if args.updates < 1 or args.rounds < 1 or args.threads < 2:
        ap.error("--updates and --rounds must be at least 1, --threads at least 2")
    seconds: dict[int, list[float]] = {args.threads: [], 1: []}
    for _ in range(args.rounds):
        for t in (args.threads, 1):
            seconds[t].append(warm_start_seconds(args.config, args.updates, t))
    many, one = statistics.median(seconds[args.threads]), statistics.median(seconds[1])
    print(f"{args.config.name}: warm start of {args.updates} updates, median of {args.rounds} alternating rounds")
    print(f"{args.threads} torch threads: {many:7.1f} s  ({', '.join(f'{s:.1f}' for s in seconds[args.threads])})")
    print(f"1 torch thread:   {one:7.1f} s  ({', '.join(f'{s:.1f}' for s in seconds[1])})")
    print(f"speed-up: {one / many:.2f}x (goal >= 1.3 with {args.threads} threads on free cores)")
    write_json(args.json, "threads", [
        Figure(name=f"main job warm start, {args.threads} threads", value=args.updates / many, unit="updates/s",
               baseline=args.updates / one, baseline_label="one torch thread", goal_op=">=", goal=1.3),
    ], {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()} | {"json": None})


if __name__ == "__main__":
    main()
