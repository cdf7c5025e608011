"""StepBatch (the columnar fast path) and its agreement with observe()."""

from __future__ import annotations

import numpy as np
import pytest

from coevolve_sdk.evolution.signals import CompetenceHistory
from coevolve_signals import BoundaryDetector, ForgettingDetector, RareDetector, RareOptions, StepBatch
from tests.signals.signals_testkit import groups_of, record


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(task_ids=["a", "b"], sizes=[2], scores=[1, 0]), "one size per group"),
        (dict(task_ids=["a"], sizes=[0], scores=[]), "at least one trajectory"),
        (dict(task_ids=["a"], sizes=[3], scores=[1, 0]), "add up to 3"),
        (dict(task_ids=["a"], sizes=[2], scores=[1.5, 0]), r"\[0, 1\]"),
        (dict(task_ids=["a"], sizes=[2], scores=[float("nan"), 0]), r"\[0, 1\]"),
        (dict(task_ids=["a"], sizes=[2], scores=[1, 0], patterns=["x"]), "action patterns"),
        (dict(task_ids=["a"], sizes=[2], scores=[1, 0], trajectory_ids=["t"]), "trajectory ids"),
        (dict(task_ids=["a"], sizes=[1], scores=[[1.0]]), "one-dimensional"),
    ],
)
def test_bad_batches_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StepBatch(0, **kwargs)


def test_layout():
    b = StepBatch(4, ["a", "b"], [2, 3], [1, 0, 0, 1, 0.5], ["x"] * 5)
    assert len(b) == 5 and b.n_groups == 2
    assert b.offsets.tolist() == [0, 2, 5]
    assert b.group_of_record.tolist() == [0, 0, 1, 1, 1]
    assert b.trajectory_id(3) == "b#3"  # made up when the caller gave no ids


def test_observe_batch_and_observe_mark_the_same_records():
    steps = [
        {"a": ([1, 0, 1], ["x", "y", "x"]), "b": ([0, 0, 0], ["x", "x", "z"])},
        {"a": ([0, 0, 1], ["x", "y", "y"]), "b": ([1, 0, 0], ["", "x", "x"])},
        {"a": ([0, 0, 0], ["x", "z", "z"]), "b": ([0, 0, 1], ["x", "x", "x"])},
    ]
    make = lambda: [ForgettingDetector(), BoundaryDetector(), RareDetector(RareOptions(theta=30, n_min=6, min_count=1))]  # noqa: E731
    fast, slow = make(), make()
    history = CompetenceHistory()
    for step, spec in enumerate(steps):
        gs = groups_of(step, spec)
        batch = StepBatch(step, [g.task.id for g in gs], [len(g.trajectories) for g in gs],
                          np.array([t.score for g in gs for t in g.trajectories]),
                          [t.action_pattern for g in gs for t in g.trajectories])
        ids = [t.id for g in gs for t in g.trajectories]
        for f, s in zip(fast, slow):
            marks = f.observe_batch(batch)
            sigs = s.observe(gs, history, step)
            assert [ids[r] for r in marks.records.tolist()] == [x.trajectory_id for x in sigs]
        record(history, gs, step)
