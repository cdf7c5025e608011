"""The core's competence history keeps each trajectory's success flag beside its score."""

from __future__ import annotations

import json

from coevolve_sdk.evolution.signals import CompetenceHistory


def test_outcomes_keep_the_flag_the_rollout_set() -> None:
    h = CompetenceHistory(capacity=3)
    h.record("a", 0, 0.9, False)  # an environment whose threshold is above 0.9
    h.record("a", 1, 0.2, True)  # or a grader that disagreed with the score
    assert h.outcomes("a") == [(0, 0.9, False), (1, 0.2, True)]
    assert h.entries("a") == [(0, 0.9), (1, 0.2)] and h.recent("a", 1) == [0.2]
    for s in range(2, 5):
        h.record("a", s, 1.0, True)
    assert [st for st, _, _ in h.outcomes("a")] == [2, 3, 4]  # capacity bounds memory


def test_state_round_trips_through_json_and_reads_old_checkpoints() -> None:
    h = CompetenceHistory()
    h.record("a", 0, 0.7, False)
    again = CompetenceHistory()
    again.load_state_dict(json.loads(json.dumps(h.state_dict())))
    assert again.outcomes("a") == [(0, 0.7, False)]
    # a checkpoint written before the flags were kept: [step, score] pairs, judged as the
    # detectors of that version judged them (a score >= 0.5 was a success)
    old = CompetenceHistory()
    old.load_state_dict({"capacity": 64, "scores": {"a": [[0, 0.5], [1, 0.4]]}})
    assert old.outcomes("a") == [(0, 0.5, True), (1, 0.4, False)]
