"""Records round-trip through JSON; the tool-call parser never evaluates and never crashes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from coevolve_sdk.env.actions import ActionParseError, format_tool_call, parse_tool_calls
from coevolve_sdk.records import (
    CandidateTask, ExplorationContext, Lineage, RolloutGroup, Signal, Step, Task, Trajectory, Triplet, Verdict,
)

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3), max_leaves=10)


@settings(max_examples=100, deadline=None)
@given(query=st.text(max_size=50), actions=st.lists(st.text(max_size=30), max_size=4), payload=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
       score=st.floats(0, 1), kind=st.sampled_from(["forgetting", "boundary", "rare"]))
def test_round_trip(query: str, actions: list[str], payload: dict, score: float, kind: str) -> None:
    task = Task(env="e", query=query, payload=payload, reference_actions=actions,
                lineage=Lineage(parent_task_id="p", signal_kind=kind, validation={"x": payload}))
    traj = Trajectory(task_id=task.id, steps=[Step(action=a, observation=a[::-1], info={"tool_names": ["t"]}) for a in actions],
                      score=score, token_ids=[1, 2], loss_mask=[0, 1], logprobs=[0.0, -1.5])
    records = [
        task, traj, RolloutGroup(task=task, step=3, trajectories=[traj]),
        Signal(kind=kind, task_id=task.id, trajectory_id=traj.id, step=3, evidence={"p": payload}),
        ExplorationContext(signal_kind=kind, summary=query, focus_pattern=actions),
        Triplet(action=query, observation=query, round=1), CandidateTask(query=query, reference_actions=actions, payload=payload),
        Verdict(candidate_id="c", accepted=True, reason=query),
    ]
    for r in records:
        assert type(r).model_validate_json(r.model_dump_json()) == r


def test_score_outside_unit_interval_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Trajectory(task_id="t", score=1.5)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=400))
def test_parser_raises_only_its_own_error(text: str) -> None:
    for candidate in (text, f"<tool_call>{text}</tool_call>", f"<tool_call>{{\"name\": {json.dumps(text)}, \"arguments\": {text}}}</tool_call>"):
        try:
            calls = parse_tool_calls(candidate)
        except ActionParseError:
            continue
        for c in calls:
            assert isinstance(c.name, str) and isinstance(c.arguments, dict)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=20), st.dictionaries(st.text(max_size=10), json_values, max_size=4))
def test_format_then_parse_is_identity(name: str, args: dict) -> None:
    calls = parse_tool_calls("thinking...\n" + format_tool_call(name, args) + format_tool_call(name, {}))
    assert [(c.name, c.arguments) for c in calls] == [(name, args), (name, {})]


def test_code_is_never_evaluated() -> None:
    with pytest.raises(ActionParseError):
        parse_tool_calls('<tool_call>__import__("os").system("touch /tmp/pwned")</tool_call>')
