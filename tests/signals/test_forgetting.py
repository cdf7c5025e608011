"""Table-driven walks of the forgetting detector through hand-built histories."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from coevolve_sdk.evolution.signals import CompetenceHistory
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
    (  # success is the trajectory's flag, score >= the environment's threshold (0.5 by default)
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
            assert s.evidence["window_successes"] == [x >= 0.5 for x in s.evidence["window"]]
            assert any(s.evidence["window_successes"])
            assert s.evidence["solved_in_window"] == sum(s.evidence["window_successes"])
            assert s.evidence["best_in_window"] == max(s.evidence["window"])
            assert s.trajectory_ids == [s.trajectory_id]
            assert "failed" in s.reason and f"step {step}" in s.reason
        if step in windows:
            assert step_sigs[0].evidence["window"] == windows[step]


def test_reason_states_the_numbers():
    det = ForgettingDetector(ForgettingOptions(window=4))
    sig = walk(det, [{"a": [1, 0]}, {"a": [0.25]}])[1][0]
    assert sig.reason == (
        "Task 'a' failed at step 1 (score 0.25), but 1 of its 2 most recent earlier trajectories succeeded "
        "(best score 1.00): a skill the policy had is failing now."
    )
    assert sig.id == "sig-forgetting-1-a@1#0"


def test_success_is_the_trajectorys_flag_not_a_fixed_score():
    """An environment with success_threshold 0.8: 0.6 neither solved the task earlier nor
    counts as solved now; 0.9 did, so a later 0.6 is forgetting although it is above 0.5."""
    det = ForgettingDetector()
    sigs = walk(det, [{"a": [0.6], "b": [0.9]}, {"a": [0.3], "b": [0.6]}], threshold=0.8)
    assert marked(sigs) == [[], ["b@1#0"]]
    assert sigs[1][0].evidence["window"] == [0.9] and sigs[1][0].evidence["window_successes"] == [True]
    assert det.window_successes("a") == [False, False]


def test_window_is_the_last_w_scores_oldest_first():
    det = ForgettingDetector(ForgettingOptions(window=3))
    walk(det, [{"a": [0.1, 0.2]}, {"a": [0.3, 0.4]}, {"a": [0.6]}])
    assert det.window("a") == [0.3, 0.4, 0.6]
    assert det.window("unknown") == []


def test_unknown_task_is_seeded_from_the_history_of_earlier_steps():
    history = CompetenceHistory()
    history.record("a", 0, 1.0, True)
    history.record("a", 5, 1.0, True)  # a later step than the one observed: must be ignored
    history.record("b", 0, 0.0, False)
    history.record("c", 0, 0.7, False)  # below its environment's threshold: not solved
    det = ForgettingDetector()
    sigs = det.observe([group(3, "a", [0.0]), group(3, "b", [0.0]), group(3, "c", [0.0])], history, 3)
    assert [s.trajectory_id for s in sigs] == ["a@3#0"]
    assert sigs[0].evidence["window"] == [1.0]


def test_a_known_task_is_not_reseeded_from_history():
    history = CompetenceHistory()
    det = ForgettingDetector()
    walk(det, [{"a": [0.0]}], history=CompetenceHistory())
    history.record("a", 0, 1.0, True)  # disagrees with what the detector saw; its own state wins
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
        det.load_state_dict({"tasks": {"a": [1.5]}, "successes": {"a": [True]}})
    with pytest.raises(ValueError, match="one success flag"):
        det.load_state_dict({"format": 2, "tasks": {"a": [1.0, 0.0]}, "successes": {"a": [True]}})


def test_state_of_format_1_is_read_with_the_rule_it_was_written_under():
    """A checkpoint from before success flags holds scores only; its detector counted >= 0.5."""
    det = ForgettingDetector()
    det.load_state_dict({"format": 1, "window": 24, "tasks": {"a": [0.5, 0.2], "b": [0.4]}})
    assert det.window_successes("a") == [True, False] and det.window_successes("b") == [False]
    assert marked(walk(det, [{"a": [0.0], "b": [0.0]}], first_step=1)) == [["a@1#0"]]
    assert det.state_dict()["format"] == 2


def test_state_round_trip_keeps_the_flags():
    det = ForgettingDetector(ForgettingOptions(window=3))
    walk(det, [{"a": [0.6, 0.9]}], threshold=0.8)
    again = ForgettingDetector(ForgettingOptions(window=3))
    again.load_state_dict(det.state_dict())
    assert again.window("a") == [0.6, 0.9] and again.window_successes("a") == [False, True]


def test_state_from_a_larger_window_keeps_the_last_scores():
    big = ForgettingDetector(ForgettingOptions(window=5))
    walk(big, [{"a": [1, 0, 0, 0, 0]}])
    small = ForgettingDetector(ForgettingOptions(window=2))
    small.load_state_dict(big.state_dict())
    assert small.window("a") == [0.0, 0.0]
    assert walk(small, [{"a": [0]}], first_step=1) == [[]]
