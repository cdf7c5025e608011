"""Table-driven walks of the forgetting detector through hand-built histories."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from coevolve_sdk.signals import CompetenceHistory
from coevolve_signals import ForgettingDetector, ForgettingOptions
from tests.signals.signals_testkit import group, marked, walk

# (case id, window W, steps, expected marked trajectory ids per step, expected evidence window of
#  the first signal of each step that has one)
CASES = [
    (
        "solved-failed-solved",
        24,
        [{"a": [1, 1]}, {"a": [0, 1]}, {"a": [1, 1]}],
        [[], ["a@1#0"], []],
        {1: [1.0, 1.0]},
    ),
    (
        "solved-failed-failed-stays-marked-inside-window",
        24,
        [{"a": [1]}, {"a": [0]}, {"a": [0.2]}],
        [[], ["a@1#0"], ["a@2#0"]],
        {1: [1.0], 2: [1.0, 0.0]},
    ),
    (
        "never-solved-never-fires",
        24,
        [{"a": [0, 0]}, {"a": [0.4, 0.49]}, {"a": [0, 0.1]}],
        [[], [], []],
        {},
    ),
    (
        "all-success-never-fires",
        24,
        [{"a": [1, 1]}, {"a": [1, 0.9]}, {"a": [0.5, 1]}],
        [[], [], []],
        {},
    ),
    (
        "success-in-the-same-step-is-not-earlier",
        24,
        [{"a": [0, 1, 0]}],
        [[]],
        {},
    ),
    (
        "window-expires-after-W-scores",
        2,
        [{"a": [1]}, {"a": [0]}, {"a": [0]}, {"a": [0]}],
        [[], ["a@1#0"], ["a@2#0"], []],
        {1: [1.0], 2: [1.0, 0.0]},
    ),
    (
        "exactly-0.5-counts-as-solved-and-not-as-failed",
        24,
        [{"a": [0.5]}, {"a": [0.49, 0.5]}],
        [[], ["a@1#0"]],
        {1: [0.5]},
    ),
    (
        "tasks-are-independent",
        24,
        [{"a": [1], "b": [0]}, {"a": [0], "b": [0]}],
        [[], ["a@1#0"]],
        {1: [1.0]},
    ),
    (
        "only-the-failing-trajectories-are-marked",
        24,
        [{"a": [1, 0, 0, 0]}, {"a": [1, 0, 0.7, 0.3]}],
        [[], ["a@1#1", "a@1#3"]],
        {1: [1.0, 0.0, 0.0, 0.0]},
    ),
    (
        "group-larger-than-window-keeps-its-last-scores",
        3,
        [{"a": [1, 0, 0, 0, 0]}, {"a": [0]}, {"b": [0, 0, 0, 0, 1]}, {"b": [0]}],
        [[], [], [], ["b@3#0"]],
        {3: [0.0, 0.0, 1.0]},
    ),
    (
        "two-groups-of-one-task-in-one-step",
        24,
        [[("a", [1]), ("a", [0])], {"a": [0]}],
        [[], ["a@1#0"]],
        {1: [1.0, 0.0]},
    ),
]


@pytest.mark.parametrize("case_id,window,steps,expected,windows", CASES, ids=[c[0] for c in CASES])
def test_forgetting_walk(case_id, window, steps, expected, windows):
    det = ForgettingDetector(ForgettingOptions(window=window))
    sigs = walk(det, steps)
    assert marked(sigs) == expected
    for step, step_sigs in enumerate(sigs):
        for s in step_sigs:
            assert s.kind == "forgetting" and s.step == step
            assert s.evidence["score"] < 0.5
            assert s.evidence["window_size"] == window
            assert any(x >= 0.5 for x in s.evidence["window"])
            assert s.evidence["solved_in_window"] == sum(x >= 0.5 for x in s.evidence["window"])
            assert s.evidence["best_in_window"] == max(s.evidence["window"])
            assert s.trajectory_ids == [s.trajectory_id]
            assert "scored" in s.reason and f"step {step}" in s.reason
        if step in windows:
            assert step_sigs[0].evidence["window"] == windows[step]


def test_reason_states_the_numbers():
    det = ForgettingDetector(ForgettingOptions(window=4))
    sig = walk(det, [{"a": [1, 0]}, {"a": [0.25]}])[1][0]
    assert sig.reason == (
        "Task 'a' scored 0.25 (< 0.5) at step 1, but 1 of its 2 most recent earlier scores reached 0.5 "
        "(best 1.00): a skill the policy had is failing now."
    )
    assert sig.id == "sig-forgetting-1-a@1#0"


def test_window_is_the_last_w_scores_oldest_first():
    det = ForgettingDetector(ForgettingOptions(window=3))
    walk(det, [{"a": [0.1, 0.2]}, {"a": [0.3, 0.4]}, {"a": [0.6]}])
    assert det.window("a") == [0.3, 0.4, 0.6]
    assert det.window("unknown") == []


def test_unknown_task_is_seeded_from_the_history_of_earlier_steps():
    history = CompetenceHistory()
    history.record("a", 0, 1.0)
    history.record("a", 5, 1.0)  # a later step than the one observed: must be ignored
    history.record("b", 0, 0.0)
    det = ForgettingDetector()
    sigs = det.observe([group(3, "a", [0.0]), group(3, "b", [0.0])], history, 3)
    assert [s.trajectory_id for s in sigs] == ["a@3#0"]
    assert sigs[0].evidence["window"] == [1.0]


def test_a_known_task_is_not_reseeded_from_history():
    history = CompetenceHistory()
    det = ForgettingDetector()
    walk(det, [{"a": [0.0]}], history=CompetenceHistory())
    history.record("a", 0, 1.0)  # disagrees with what the detector saw; its own state wins
    assert det.observe([group(1, "a", [0.0])], history, 1) == []


def test_options_are_strict():
    with pytest.raises(ValidationError):
        ForgettingOptions(window=0)
    with pytest.raises(ValidationError):
        ForgettingOptions(W=3)  # type: ignore[call-arg]
    assert ForgettingOptions().window == 24


def test_bad_state_is_refused_with_a_clear_error():
    det = ForgettingDetector()
    with pytest.raises(ValueError, match="tasks"):
        det.load_state_dict({"window": 3})
    with pytest.raises(ValueError, match="format"):
        det.load_state_dict({"format": 99, "tasks": {}})
    with pytest.raises(ValueError, match="outside"):
        det.load_state_dict({"tasks": {"a": [1.5]}})


def test_state_from_a_larger_window_keeps_the_last_scores():
    big = ForgettingDetector(ForgettingOptions(window=5))
    walk(big, [{"a": [1, 0, 0, 0, 0]}])
    small = ForgettingDetector(ForgettingOptions(window=2))
    small.load_state_dict(big.state_dict())
    assert small.window("a") == [0.0, 0.0]
    assert walk(small, [{"a": [0]}], first_step=1) == [[]]
