"""Table-driven walks of the boundary detector through hand-built groups."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from coevolve_signals import BoundaryDetector, BoundaryOptions
from tests.signals.signals_testkit import marked, walk

# (case id, one step's groups, expected marked trajectory ids, expected (successes, failures) of
#  the marked groups by task)
CASES = [
    ("all-success", {"a": [1, 1, 1, 1]}, [], {}),
    ("all-failure", {"a": [0, 0, 0, 0]}, [], {}),
    ("mixed-marks-all-k", {"a": [1, 0, 1, 1]}, ["a@0#0", "a@0#1", "a@0#2", "a@0#3"], {"a": (3, 1)}),
    ("one-success-is-enough", {"a": [0, 0, 0.75]}, ["a@0#0", "a@0#1", "a@0#2"], {"a": (1, 2)}),
    # success is the trajectory's flag, score >= the environment's threshold (0.5 by default)
    ("exactly-half-is-a-success", {"a": [0.5, 0.5, 0.5]}, [], {}),
    ("half-and-success-is-not-mixed", {"a": [0.5, 1.0]}, [], {}),
    ("half-and-failure-is-mixed", {"a": [0.5, 0.0]}, ["a@0#0", "a@0#1"], {"a": (1, 1)}),
    ("just-below-half-is-a-failure", {"a": [0.49, 0.8]}, ["a@0#0", "a@0#1"], {"a": (1, 1)}),
    ("single-trajectory-group-is-never-mixed", {"a": [1], "b": [0]}, [], {}),
    (
        "only-mixed-groups-among-several",
        {"a": [1, 1], "b": [0, 1], "c": [0, 0], "d": [0.9, 0.1]},
        ["b@0#0", "b@0#1", "d@0#0", "d@0#1"],
        {"b": (1, 1), "d": (1, 1)},
    ),
]


@pytest.mark.parametrize("case_id,step,expected,counts", CASES, ids=[c[0] for c in CASES])
def test_boundary_groups(case_id, step, expected, counts):
    det = BoundaryDetector()
    [sigs] = walk(det, [step])
    assert marked([sigs]) == [expected]
    for s in sigs:
        ev = s.evidence
        assert s.kind == "boundary"
        assert (ev["successes"], ev["failures"]) == counts[s.task_id]
        assert ev["group_size"] == len(step[s.task_id])
        assert ev["group_scores"] == [float(x) for x in step[s.task_id]]
        assert ev["group_successes"] == [float(x) >= 0.5 for x in step[s.task_id]]
        assert ev["group_trajectory_ids"] == [f"{s.task_id}@0#{i}" for i in range(len(step[s.task_id]))]
        assert ev["score"] == float(step[s.task_id][int(s.trajectory_id.split("#")[1])])


def test_boundary_has_no_memory_between_steps():
    det = BoundaryDetector()
    sigs = walk(det, [{"a": [1, 1]}, {"a": [0, 0]}, {"a": [1, 0]}])
    assert marked(sigs) == [[], [], ["a@2#0", "a@2#1"]]
    assert det.state_dict() == {}


def test_reason_sentence():
    [[first, _]] = walk(BoundaryDetector(), [{"a": [1, 0]}])
    assert first.reason == (
        "The 2 trajectories of task 'a' at step 0 mix 1 success(es) with 1 failure(s): "
        "the policy is at its decision boundary on this task; this trajectory scored 1.00 (a success)."
    )


def test_success_is_the_trajectorys_flag_not_a_fixed_score():
    """An environment with success_threshold 0.8: 0.6 fails there, so [0.6, 0.9] is mixed, and
    [0.3, 0.6] (two failures) is not, whatever 0.5 would say."""
    det = BoundaryDetector()
    [sigs] = walk(det, [{"a": [0.6, 0.9], "b": [0.3, 0.6]}], threshold=0.8)
    assert [s.trajectory_id for s in sigs] == ["a@0#0", "a@0#1"]
    assert sigs[0].evidence["group_successes"] == [False, True] and not sigs[0].evidence["success"]
    # and a flag set by a grader (the judge's veto, say) counts even against the score
    from tests.signals.signals_testkit import group

    g = group(0, "c", [1.0, 1.0])
    g.trajectories[1].success = False
    assert [s.trajectory_id for s in det.observe([g], None, 0)] == ["c@0#0", "c@0#1"]  # type: ignore[arg-type]


def test_options_and_state_are_strict():
    with pytest.raises(ValidationError):
        BoundaryOptions(threshold=0.4)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="stateless"):
        BoundaryDetector().load_state_dict({"x": 1})
    BoundaryDetector().load_state_dict({})


def test_empty_step():
    assert BoundaryDetector().observe([], None, 0) == []  # type: ignore[arg-type]
