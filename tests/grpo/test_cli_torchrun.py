"""`coevolve run` under torchrun with two real CPU processes: both ranks' states land in the one
atomic checkpoint, and the run resumes under the same launcher."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_two_process_run_checkpoints_every_rank_and_resumes(tmp_path: Path, sub_env: dict[str, str]) -> None:
    torchrun = Path(sys.executable).parent / "torchrun"
    env = dict(sub_env, OMP_NUM_THREADS="1")
    run_dir = tmp_path / "run"
    base = [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "coevolve_sdk", "run"]
    first = subprocess.run([*base, str(REPO / "examples" / "kvstore-tiny.yaml"), "--set", f"run_dir={run_dir}",
                            "--set", "algorithm.options.cpu=true", "--set", "training.steps=2", "--set", "training.checkpoint_every=1",
                            "--set", "algorithm.options.warm_start.steps=10", "--set", "eval.max_tasks=2", "-q"],
                           capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    ck = run_dir / "checkpoints" / "step-000002"
    assert (ck / "algorithm" / "rng-rank0.json").exists() and (ck / "algorithm" / "rng-rank1.json").exists()
    assert (ck / "policy" / "model.safetensors").exists() and (ck / "algorithm" / "optimizer.safetensors").exists()
    assert not [f for f in ck.rglob("*") if f.suffix in (".pkl", ".bin", ".pt")], "a checkpoint holds only safetensors and JSON"
    assert not list((run_dir / "checkpoints").glob("*.tmp")) and not list((run_dir / "checkpoints").glob(".rank*"))
    again = subprocess.run([*base, "--resume", str(run_dir), "--set", "training.steps=3"], capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resumed from step-000002" in again.stdout
    import sqlite3

    con = sqlite3.connect(run_dir / "run.sqlite")
    steps = [r[0] for r in con.execute("SELECT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")]
    assert steps == [1, 2, 3]
    assert os.path.exists(run_dir / "report.html")
