"""The teacher's strict judge takes part in validation: its "no" rejects a candidate whose replay
the grader accepted (the grader of a synthetic task is derived from its own actions, so only a
judge can see that the query says something else)."""

from __future__ import annotations

import json
from pathlib import Path

from coevolve_sdk.evolution.rounds import Evolver
from coevolve_litellm import LiteLLMTeacher, LiteLLMTeacherOptions
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.validation import Validator

from .teacher_script import good_teacher


def run_round(scripted, env, signalled, tmp_path: Path, verdict: str, use_judge: bool):
    def script(stage, messages):
        if stage == "judge":
            return verdict
        return good_teacher(stage, messages)

    s = scripted(script)
    sig, traj = signalled
    teacher = LiteLLMTeacher(LiteLLMTeacherOptions(model="scripted/t", use_judge=use_judge, rounds=1, steps_per_round=5))
    store = RunStore(tmp_path / "run.sqlite")
    task = env.tasks()[0]
    res = Evolver(teacher, Validator(), type(env), store, workers=1).run_round(1, 1, [sig], {traj.id: traj}, {task.id: task}, set())
    return res, s, store


def test_judge_no_rejects(scripted, env, signalled, tmp_path: Path) -> None:
    res, s, store = run_round(scripted, env, signalled, tmp_path, "Success: false\nReason: the query asks for something else.", True)
    assert "judge" in s.stages()
    assert not res.accepted
    assert any("judge" in v["reason"] for v in store.verdicts(accepted=False))
    # the judge's calls are part of the signal's usage
    assert store.usage_rows()[0]["calls"] == len(s.calls)


def test_judge_yes_or_abstaining_accepts(scripted, env, signalled, tmp_path: Path) -> None:
    res, s, store = run_round(scripted, env, signalled, tmp_path / "a", "Success: true\nReason: fine.", True)
    assert res.accepted and all("judge agrees" in v["reason"] for v in store.verdicts(accepted=True))
    res2, s2, _ = run_round(scripted, env, signalled, tmp_path / "b", "Success: false", False)
    assert res2.accepted and "judge" not in s2.stages()


def test_an_exhausted_budget_stops_the_round_cleanly(scripted, env, signalled, tmp_path: Path) -> None:
    from coevolve_litellm import TeacherBudget

    s = scripted(good_teacher)
    sig, traj = signalled
    task = env.tasks()[0]
    more = [sig.model_copy(update={"id": f"sig-{i}", "kind": k}) for i, k in enumerate(["boundary", "rare"])]
    teacher = LiteLLMTeacher(LiteLLMTeacherOptions(model="scripted/t", rounds=1, steps_per_round=5, budget=TeacherBudget(max_calls=4)))
    store = RunStore(tmp_path / "run.sqlite")
    res = Evolver(teacher, Validator(), type(env), store, workers=1).run_round(1, 1, [sig, *more], {traj.id: traj}, {task.id: task}, set())
    assert res.budget_exhausted
    assert len(s.calls) == 4  # no request past the budget
    assert store.rounds()[0]["budget_exhausted"] is True
