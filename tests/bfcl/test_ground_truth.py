"""Every official multi-turn entry, replayed through the environment, against BFCL's checker.

All 800 entries run (about 3 s on one core): the ground truth must score 1.0, in both action
formats, and every entry with its last ground-truth call dropped must get exactly the verdict
BFCL's checker gives when called directly on the same calls.
"""

from __future__ import annotations

import copy

import pytest

from coevolve_bfcl import _bfcl
from coevolve_bfcl.env import CANNOT_ANSWER, END_OF_TURN_ANSWER

from .helpers import CATEGORIES, make_env


def _python_actions(gt: list[list[str]]) -> list[str]:
    out = []
    for turn in gt:
        if turn:
            out += ["[" + ", ".join(turn) + "]", END_OF_TURN_ANSWER]
        else:
            out.append(CANNOT_ANSWER)
    return out


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_ground_truth_entry_scores_one(category, entries_by_category):
    env = make_env(category=category)
    tasks = env.tasks("all")
    assert len(tasks) == len(entries_by_category[category]) == 200
    failures = []
    for t in tasks:
        r = env.replay(t, t.reference_actions)
        if r.score != 1.0 or r.errors or not env.done:
            failures.append((t.id, env.grade(), r.errors[:2]))
        # the episode ended on its own, after the last user turn, with the grade in the info
        assert env.steps[-1].info["bfcl"]["valid"] is (r.score == 1.0)
    assert failures == []


@pytest.mark.parametrize("category", CATEGORIES)
def test_ground_truth_in_python_call_syntax_scores_one(category, entries_by_category):
    env = make_env(category=category)
    bad = []
    for t in env.tasks("all"):
        gt = t.payload["entry"]["ground_truth"]
        r = env.replay(t, _python_actions(gt))
        if r.score != 1.0:
            bad.append(t.id)
    assert bad == []


def _drop_last_call(gt: list[list[str]]) -> list[list[str]] | None:
    gt = copy.deepcopy(gt)
    for turn in reversed(gt):
        if turn:
            turn.pop()
            return gt
    return None


@pytest.mark.parametrize("category", CATEGORIES)
def test_dropped_last_call_gets_the_official_verdict(category, entries_by_category):
    env = make_env(category=category)
    verdicts = {True: 0, False: 0}
    mismatches = []
    for t in env.tasks("all"):
        entry = t.payload["entry"]
        cut = _drop_last_call(entry["ground_truth"])
        assert cut is not None
        # Direct: BFCL's checker on BFCL's own call strings, one step per turn.
        direct_calls = [[turn] if turn else [] for turn in cut]
        direct = _bfcl.official_check(direct_calls, entry)["valid"]
        # Ours: the same calls sent as agent messages (python syntax, so the call text is BFCL's).
        r = env.replay(t, _python_actions(cut))
        ours = r.score == 1.0
        verdicts[ours] += 1
        if ours != direct:
            mismatches.append((t.id, ours, direct, env.grade()))
    assert mismatches == []
    # The check is not vacuous: dropping a call breaks most entries, but not all of them.
    assert verdicts[False] > 150
