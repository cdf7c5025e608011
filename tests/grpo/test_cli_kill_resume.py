"""`coevolve run` with GRPO, killed with SIGKILL and resumed, ends with exactly the weights and
sampled tokens of a run that was never interrupted (model, optimiser state and RNG come back;
tests/core/test_resume_exact.py checks pool, rounds and signals at every kill point). The run
folder is data: `coevolve eval` of it never runs a pickle planted in its checkpoint. A model
that no longer fits the checkpoint stops the resume without setting anything aside."""

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
    # AdamW's decoupled decay moves the weights at every step even when every group's rewards
    # are equal (no policy gradient), so the weight comparison always covers the optimiser's
    # step count and learning rate
    "--set", "algorithm.options.weight_decay=0.01",
]


def weights(run: Path, step: int) -> dict:
    import safetensors.torch as st

    return st.load_file(str(run / "checkpoints" / f"step-{step:06d}" / "policy" / "model.safetensors"))


def _metric(run: Path, key: str) -> float | None:
    import sqlite3

    con = sqlite3.connect(run / "run.sqlite")
    try:
        row = con.execute("SELECT value FROM metrics WHERE key = ?", (key,)).fetchone()
    finally:
        con.close()
    return None if row is None else row[0]


def trajectories(run: Path) -> list[tuple]:
    import json
    import sqlite3
    import zlib

    con = sqlite3.connect(run / "run.sqlite")
    try:
        rows = con.execute("SELECT id, step, data FROM trajectories WHERE phase = 'train' ORDER BY step, id").fetchall()
    finally:
        con.close()
    out = []
    for tid, step, data in rows:
        d = json.loads(zlib.decompress(data) if isinstance(data, bytes) else data)  # compressed by default
        out.append((tid, step, d["token_ids"], d["logprobs"], d["score"]))
    assert {r[1] for r in out} == {1, 2, 3, 4, 5}
    return out


@pytest.mark.slow
def test_sigkill_and_resume_match_an_uninterrupted_run(tmp_path: Path, sub_env: dict[str, str]) -> None:
    config = str(REPO / "examples" / "kvstore-tiny.yaml")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    # the second run takes its warm start from the first one's cache: cheaper, and a cached warm
    # start must lead to exactly the run a computed one leads to (the comparison below checks it)
    cache = ["--set", f"algorithm.options.warm_start.cache={tmp_path / 'warm-start-cache'}"]
    out = subprocess.run([*coevolve_cmd(), "run", config, "--set", f"run_dir={whole}", *SETTINGS, *cache, "-q"],
                         capture_output=True, text=True, env=sub_env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]

    proc = subprocess.Popen([*coevolve_cmd(), "run", config, "--set", f"run_dir={killed}", *SETTINGS, *cache, "-q"],
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
    assert _metric(killed, "warm_start/warm_start_cached") == 1.0 and _metric(whole, "warm_start/warm_start_cached") is None

    a, b = weights(whole, 5), weights(killed, 5)
    assert a.keys() == b.keys()
    for k in a:
        assert (a[k] == b[k]).all(), f"{k} differs after resume"
    # and training did change the weights after the first checkpoint, so the comparison means something
    first = weights(whole, 1)
    assert any((first[k] != a[k]).any() for k in a)
    # the replayed steps sampled exactly the same tokens: the RNG states came back
    assert trajectories(whole) == trajectories(killed)

    # Crafted pickles where a checkpoint keeps files, or kept them before: never executed.
    from .test_checkpoint_files import plant

    ck, marker = killed / "checkpoints" / "step-000005", tmp_path / "ran"
    for name in ("policy/pytorch_model.bin", "algorithm/optimizer.bin", "algorithm/accelerate/custom_checkpoint_0.pkl",
                 "algorithm/accelerate/random_states_0.pkl", "algorithm/reference/reference.pt"):
        plant(ck / name, marker)
    ev = subprocess.run([*coevolve_cmd(), "eval", str(killed)], capture_output=True, text=True, env=sub_env, timeout=600)
    assert ev.returncode == 0 and not marker.exists(), ev.stdout[-2000:] + ev.stderr[-2000:]
    plant(ck / "policy" / "model.safetensors", marker)  # one it needs: refused, named, no traceback
    ev = subprocess.run([*coevolve_cmd(), "eval", str(killed)], capture_output=True, text=True, env=sub_env, timeout=600)
    said = ev.stdout + ev.stderr
    assert not marker.exists() and "model.safetensors" in said and "Traceback" not in said, said[-3000:]


def test_a_changed_model_size_stops_the_resume_and_sets_nothing_aside(tmp_path: Path, sub_env: dict[str, str]) -> None:
    """Even with --allow-config-change, a checkpoint that no longer fits the model is not damage:
    every older checkpoint would not fit either, so nothing is set aside or rolled back."""
    import sqlite3

    run = tmp_path / "run"
    small = ["--set", "algorithm.options.warm_start.steps=5", "--set", "training.steps=2", "--set", "training.checkpoint_every=1",
             "--set", "pool.seed_tasks=8", "--set", "training.tasks_per_step=2", "--set", "eval.max_tasks=2"]
    first = subprocess.run([*coevolve_cmd(), "run", str(REPO / "examples" / "kvstore-tiny.yaml"), "--set", f"run_dir={run}", *small, "-q"],
                           capture_output=True, text=True, env=sub_env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]

    def state() -> tuple:
        con = sqlite3.connect(run / "run.sqlite")
        try:
            counts = tuple(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                           for t in ("metrics", "trajectories WHERE phase = 'train'", "tasks", "signals"))
        finally:
            con.close()
        return counts, sorted(p.name for p in (run / "checkpoints").iterdir())

    before = state()
    out = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "--set", "training.steps=3", "--set", "policy.options.hidden_size=48",
                          "--allow-config-change"], capture_output=True, text=True, env=sub_env, timeout=600)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "size changed" in out.stderr and "--restart" in out.stderr
    assert state() == before
    assert not any(p.name.endswith(".damaged") for p in (run / "checkpoints").iterdir())
    # undoing the change resumes (the final evaluation, rolled back with the extended step count, is made again)
    again = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "--set", "training.steps=3", "-q", "--allow-config-change"],
                           capture_output=True, text=True, env=sub_env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
