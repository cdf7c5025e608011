"""Table-driven walks of the rare detector through hand-built pattern streams."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from coevolve_signals import RareDetector, RareOptions
from tests.signals.signals_testkit import marked, walk


def pats(step_patterns: list[str], task: str = "a") -> dict:
    """One group of trajectories with these action patterns (scores are irrelevant to rarity)."""
    return {task: ([0.0] * len(step_patterns), step_patterns)}


# (case id, options, per-step patterns, expected marked ids per step, expected (c_p, N) per step of
#  the marked trajectories)
CASES = [
    (
        # θ = 25 %: y is seen once at N = 4 (a singleton, min_count 2), twice at N = 8 (2/8 = 25 %,
        # not < 25 %), absent at N = 12, three times at N = 16 (3/16 < 25 %): it crosses the threshold.
        "crosses-threshold-as-N-grows",
        dict(theta=25, n_min=4, min_count=2),
        [["x", "x", "x", "y"], ["x", "x", "x", "y"], ["x", "x", "x", "x"], ["x", "x", "x", "y"]],
        [[], [], [], ["a@3#3"]],
        [None, None, None, (3, 16)],
    ),
    (
        "nothing-before-n-min",
        dict(theta=25, n_min=20, min_count=1),
        [["x"] * 9 + ["y"], ["x"] * 9 + ["y"], ["x"] * 9 + ["y"]],
        [[], ["a@1#9"], ["a@2#9"]],
        [None, (2, 20), (3, 30)],
    ),
    (
        "singleton-needs-min-count-1",
        dict(theta=25, n_min=1, min_count=1),
        [["x"] * 4, ["x"] * 3 + ["z"]],
        [[], ["a@1#3"]],
        [None, (1, 8)],
    ),
    (
        "singleton-is-not-rare-by-default",
        dict(theta=25, n_min=1),
        [["x"] * 4, ["x"] * 3 + ["z"]],
        [[], []],
        [None, None],
    ),
    (
        "common-pattern-never-rare",
        dict(theta=5, n_min=1, min_count=1),
        [["x", "y"] * 5, ["x", "y"] * 5],
        [[], []],
        [None, None],
    ),
    (
        "rarity-counts-this-step-too",
        # y twice in one step: c_y = 2 of N = 10 (20 % < 25 %) marks both at once.
        dict(theta=25, n_min=10, min_count=2),
        [["x"] * 8 + ["y", "y"]],
        [["a@0#8", "a@0#9"]],
        [(2, 10)],
    ),
    (
        "a-pattern-drifts-out-of-rarity",
        dict(theta=30, n_min=1, min_count=2),
        [["x", "x", "x", "y", "y"] + ["x"] * 5, ["y"] * 10],
        [["a@0#3", "a@0#4"], []],
        [(2, 10), None],
    ),
    (
        "empty-patterns-are-ignored-by-default",
        # N counts only the 4 x's, so the two empty patterns neither dilute nor fire.
        dict(theta=50, n_min=4, min_count=1),
        [["x", "x", "x", "x", "", ""]],
        [[]],
        [None],
    ),
    (
        "empty-patterns-count-when-asked",
        dict(theta=50, n_min=4, min_count=2, count_empty=True),
        [["x", "x", "x", "x", "", ""]],
        [["a@0#4", "a@0#5"]],
        [(2, 6)],
    ),
    (
        "share-exactly-at-theta-is-not-rare",
        dict(theta=20, n_min=1, min_count=1),
        [["x", "x", "x", "x", "y"]],
        [[]],
        [None],
    ),
]


@pytest.mark.parametrize("case_id,options,steps,expected,numbers", CASES, ids=[c[0] for c in CASES])
def test_rare_walk(case_id, options, steps, expected, numbers):
    det = RareDetector(RareOptions(**options))
    sigs = walk(det, [pats(p) for p in steps])
    assert marked(sigs) == expected
    for step, step_sigs in enumerate(sigs):
        for s in step_sigs:
            ev = s.evidence
            assert (ev["c_p"], ev["N"]) == numbers[step]
            assert ev["share"] == ev["c_p"] / ev["N"]
            assert 100 * ev["c_p"] < options["theta"] * ev["N"]
            assert ev["pattern"] == steps[step][int(s.trajectory_id.split("#")[1])]
            assert s.kind == "rare"


def test_counts_and_reason():
    det = RareDetector(RareOptions(theta=25, n_min=1))
    [[s1, s2]] = walk(det, [pats(["x"] * 8 + ["get>put", "get>put"])])
    assert det.total == 10 and det.count("x") == 8 and det.count("get>put") == 2 and det.count("nope") == 0
    assert s1.reason == (
        "Action pattern 'get>put' has been taken 2 times among the 10 patterns seen so far "
        "(20.00% < θ = 25%): the policy rarely explores it, yet it recurs."
    )
    assert s1.evidence["theta"] == 25.0 and s1.evidence["n_min"] == 1 and s1.evidence["min_count"] == 2


def test_patterns_are_counted_across_tasks():
    # y: once per task, c_y = 2 of N = 8 (25 % < 30 %): counts are pooled over all tasks.
    det = RareDetector(RareOptions(theta=30, n_min=1))
    sigs = walk(det, [{"a": ([0] * 4, ["x", "x", "x", "y"]), "b": ([1] * 4, ["x", "x", "x", "y"])}])
    assert marked(sigs) == [["a@0#3", "b@0#3"]]


def test_options_are_strict():
    for bad in (dict(theta=0), dict(theta=100), dict(n_min=0), dict(min_count=0), dict(N_min=3)):
        with pytest.raises(ValidationError):
            RareOptions(**bad)
    d = RareOptions()
    assert (d.theta, d.n_min, d.min_count, d.count_empty) == (5.0, 512, 2, False)


def test_bad_state_is_refused_with_a_clear_error():
    det = RareDetector()
    with pytest.raises(ValueError, match="counts"):
        det.load_state_dict({"N": 3})
    with pytest.raises(ValueError, match="add up"):
        det.load_state_dict({"N": 3, "counts": {"x": 2}})
    with pytest.raises(ValueError, match="negative"):
        det.load_state_dict({"N": -1, "counts": {"x": -1}})


def test_batch_without_patterns_is_refused():
    from coevolve_signals import StepBatch

    with pytest.raises(ValueError, match="action pattern"):
        RareDetector().observe_batch(StepBatch(0, ["a"], [1], [1.0]))
