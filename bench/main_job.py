"""The main job's wall time and peak memory against its budgets (15 minutes, 3 GB).

Runs `coevolve run examples/bfcl-tiny.yaml` exactly as `make demo` does, in a fresh run folder,
and prints wall time, peak resident memory of the run's process tree, and the time per phase
from the run store. Budgets come from the project's goals, not from a timed assert.

    python bench/main_job.py [--config examples/bfcl-tiny.yaml] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S, BUDGET_GB = 15 * 60, 3.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(REPO / "examples" / "bfcl-tiny.yaml"))
    ap.add_argument("--set", action="append", default=[], dest="sets")
    args = ap.parse_args()
    coevolve = Path(sys.executable).parent / "coevolve"
    with tempfile.TemporaryDirectory() as d:
        run_dir = Path(d) / "run"
        cmd = [str(coevolve), "run", args.config, "--set", f"run_dir={run_dir}", "-q"]
        for s in args.sets:
            cmd += ["--set", s]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            raise SystemExit(proc.returncode)
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
        con = sqlite3.connect(run_dir / "run.sqlite")
        phases = dict(con.execute("SELECT key, SUM(value) FROM metrics WHERE key LIKE 'time/%' GROUP BY key").fetchall())
        evals = con.execute("SELECT phase, data FROM evals").fetchall()
        synth = con.execute("SELECT COUNT(*) FROM tasks WHERE origin='synthetic'").fetchone()[0]
        con.close()
    print(f"{'phase':<24} {'seconds':>8}")
    for k, v in sorted(phases.items()):
        print(f"{k:<24} {v:8.1f}")
    print(f"evaluations: {len(evals)}, synthetic tasks admitted: {synth}")
    print(f"wall time   {wall:8.1f} s   budget {BUDGET_S} s   ratio {wall / BUDGET_S:.2f}")
    print(f"peak memory {peak_gb:8.2f} GB  budget {BUDGET_GB} GB   ratio {peak_gb / BUDGET_GB:.2f}")


if __name__ == "__main__":
    main()
