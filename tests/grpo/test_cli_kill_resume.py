"""`coevolve run` with GRPO, killed with SIGKILL and resumed, ends with exactly the weights of a
run that was never interrupted: model, optimiser state, RNG and pool all come back."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, coevolve_cmd

SETTINGS = [
    "--set", "algorithm.options.warm_start.steps=80", "--set", "training.checkpoint_every=1",
    "--set", "training.steps=5", "--set", "training.tasks_per_step=4", "--set", "evolution.every=2",
    "--set", "pool.seed_tasks=8", "--set", "eval.max_tasks=2", "--set", "training.keep_checkpoints=10",
]


def weights(run: Path, step: int) -> dict:
    import safetensors.torch as st

    return st.load_file(str(run / "checkpoints" / f"step-{step:06d}" / "policy" / "model.safetensors"))


@pytest.mark.slow
def test_sigkill_and_resume_match_an_uninterrupted_run(tmp_path: Path, sub_env: dict[str, str]) -> None:
    config = str(REPO / "examples" / "kvstore-tiny.yaml")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    out = subprocess.run([*coevolve_cmd(), "run", config, "--set", f"run_dir={whole}", *SETTINGS, "-q"],
                         capture_output=True, text=True, env=sub_env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]

    proc = subprocess.Popen([*coevolve_cmd(), "run", config, "--set", f"run_dir={killed}", *SETTINGS, "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=sub_env)
    latest = killed / "checkpoints" / "latest"
    deadline = time.time() + 600
    while time.time() < deadline and not latest.exists():
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert latest.exists() and proc.returncode == -signal.SIGKILL
    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(killed)], capture_output=True, text=True, env=sub_env, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    a, b = weights(whole, 5), weights(killed, 5)
    assert a.keys() == b.keys()
    for k in a:
        assert (a[k] == b[k]).all(), f"{k} differs after resume"
    # and training did change the weights after the first checkpoint, so the comparison means something
    first = weights(whole, 1)
    assert any((first[k] != a[k]).any() for k in a)
