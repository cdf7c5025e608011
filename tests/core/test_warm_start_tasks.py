"""`training.warm_start_tasks`: the warm start clones more demonstrations than the pool RL trains
on (the environment's first N train tasks), and the pool stays `pool.seed_tasks`."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, coevolve_cmd

pytest.importorskip("torch")

SMALL = ["--set", "pool.seed_tasks=4", "--set", "training.steps=0", "--set", "algorithm.options.warm_start.steps=2",
         "--set", "eval.max_tasks=2", "-q"]


def _run(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*coevolve_cmd(), "run", str(REPO / "examples" / "kvstore-tiny.yaml"), "--set", f"run_dir={tmp / 'run'}",
                           *SMALL, *extra], capture_output=True, text=True, timeout=600)


def test_the_warm_start_clones_the_first_n_train_tasks_and_the_pool_stays_the_seed_pool(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--set", "training.warm_start_tasks=24")
    assert proc.returncode == 0, proc.stderr[-3000:]
    con = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    try:
        examples = con.execute("SELECT value FROM metrics WHERE key = 'warm_start/warm_start_examples'").fetchone()[0]
        pool = con.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
    finally:
        con.close()
    assert examples == 24 and pool == 4


def test_a_bad_count_is_a_config_error(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--set", "training.warm_start_tasks=0")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "warm_start_tasks" in proc.stderr and "Traceback" not in proc.stderr


def test_a_demonstration_whose_actions_fail_is_left_out_of_the_warm_start_and_said(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from coevolve_sdk.components.registry import get_registry
    from coevolve_sdk.evolution.seed_pool import warm_start_tasks
    from coevolve_sdk.storage.store import RunStore

    env_cls = get_registry().get("environment", "kvstore")
    good = env_cls({"train_tasks": 6}).tasks("train")
    broken = good[4].model_copy(update={"reference_actions": ["this is not a tool call"] * len(good[4].reference_actions)})
    offered = [*good[:4], broken, good[5]]

    class Offering(env_cls):  # type: ignore[misc, valid-type]
        def tasks(self, split: str):  # the train split with one bad demonstration beyond the pool
            return list(offered) if split == "train" else super().tasks(split)

    store = RunStore(tmp_path / "run.sqlite")
    logged: list[str] = []
    cfg = SimpleNamespace(training=SimpleNamespace(warm_start_tasks=6))
    pool = SimpleNamespace(tasks=offered[:2])
    demos = warm_start_tasks(cfg, lambda: Offering({"train_tasks": 6}), pool, store, log=logged.append,  # type: ignore[arg-type]
                             progress=lambda *a: None)
    assert [t.id for t in demos] == [t.id for t in offered if t.id != broken.id]
    warning = next(m for m in logged if m.startswith("WARNING"))
    assert broken.id in warning and "left out of the warm start" in warning and "1 of 4 warm-start demonstrations" in warning
    assert store.notes()[0]["kind"] == "warm_start_tasks_dropped"
