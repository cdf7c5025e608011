"""The run store: durable tasks, whole-step transactions, truncation on resume."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from coevolve_sdk.evolution.pool import TaskPool, UniformSampler
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Signal, Task, Trajectory

import numpy as np


def test_wal_tasks_durable_and_dedup(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    assert sqlite3.connect(tmp_path / "run.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    pool = TaskPool(store)
    t1 = Task(env="e", query="Do A", reference_actions=["a", "b", "c"])
    dup = Task(env="e", query="  do a ", reference_actions=["a", "b", "c"])
    assert pool.admit([t1, dup], step=3) == [t1]
    store.close()
    again = TaskPool(RunStore(tmp_path / "run.sqlite"))
    assert [t.id for t in again.tasks] == [t1.id]


def test_rollback_to_step_1_keeps_the_tasks_of_step_1(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    pool = TaskPool(store)
    seqs = []
    for step in (1, 2, 3):
        tr = Trajectory(task_id="t", score=1.0, step=step)
        store.record_step(step, [tr], [Signal(kind="k", task_id="t", trajectory_id=tr.id, step=step)], {"rollout/reward_mean": 1.0})
        pool.admit([Task(env="e", query=f"q{step}")], step=step)
        seqs.append(store.max_task_seq())
    store.rollback(1, seqs[0], 0)
    assert store.steps_done() == [1]
    assert [t.query for t in store.load_tasks()] == ["q1"]
    assert [s for s, _, _ in store.signal_counts()] == [1]


def test_uniform_sampler_is_seeded(tmp_path: Path) -> None:
    tasks = [Task(env="e", query=str(i)) for i in range(10)]
    s = UniformSampler()
    a = s.sample(tasks, 4, np.random.default_rng(0), 1)
    b = s.sample(tasks, 4, np.random.default_rng(0), 1)
    assert [t.id for t in a] == [t.id for t in b] and len({t.id for t in a}) == 4
    assert len(s.sample(tasks[:2], 5, np.random.default_rng(0), 1)) == 5


def test_synthetic_share_sampler_reserves_part_of_the_batch() -> None:
    from coevolve_sdk.evolution.pool import SyntheticShareSampler

    seed = [Task(env="e", query=f"s{i}") for i in range(20)]
    synth = [Task(env="e", query=f"y{i}", origin="synthetic") for i in range(3)]
    s = SyntheticShareSampler(SyntheticShareSampler.Options(share=0.5))
    batch = s.sample(seed + synth, 8, np.random.default_rng(1), 1)
    assert len(batch) == 8
    assert sum(t.origin == "synthetic" for t in batch) == 3  # all 3 (fewer than half of 8) are in
    only_seed = s.sample(seed, 8, np.random.default_rng(1), 1)
    assert all(t.origin == "seed" for t in only_seed) and len(only_seed) == 8
