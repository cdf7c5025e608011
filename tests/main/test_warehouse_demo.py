"""`make demo`'s run (examples/warehouse-tiny.yaml) at a reduced size, run as a user runs it:
held-out evaluations before the warm start, before RL, during and after, and a report."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import REPO, coevolve_cmd

REDUCED = {
    "training.steps": 4, "training.checkpoint_every": 2, "evolution.every": 2, "eval.every": 2, "eval.max_tasks": 6,
    "pool.seed_tasks": 48, "algorithm.options.warm_start.steps": 20, "algorithm.options.warm_start.cache": "null",
}


def test_the_demo_evaluates_before_the_warm_start_before_rl_during_and_after(tmp_path: Path) -> None:
    run = tmp_path / "warehouse-tiny"
    sets = [a for k, v in REDUCED.items() for a in ("--set", f"{k}={v}")]
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", OMP_NUM_THREADS="1")
    proc = subprocess.run([*coevolve_cmd(), "run", str(REPO / "examples" / "warehouse-tiny.yaml"), "--set", f"run_dir={run}", *sets],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    con = sqlite3.connect(run / "run.sqlite")
    try:
        evals = con.execute("SELECT phase, step, split FROM evals ORDER BY id").fetchall()
    finally:
        con.close()
    assert evals == [("initial", 0, "test"), ("before", 0, "test"), ("during", 2, "test"), ("after", 4, "test")]
    assert "eval initial:" in proc.stdout and "eval after:" in proc.stdout
    html = (run / "report.html").read_text()
    assert "report/eval.png" in html and "initial" in html
