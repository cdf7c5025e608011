"""The LiteLLM teacher on BFCL, through litellm's real code path with a scripted remote model:
a signal becomes admitted BFCL tasks that BFCL's official checker grades."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("bfcl_eval") is None:  # pragma: no cover - depends on the install
    pytest.skip("bfcl-eval is not installed: python -m coevolve_bfcl.install", allow_module_level=True)

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.evolution.rounds import Evolver
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Signal, Trajectory
from coevolve_sdk.evolution.validation import Validator

PLAN = [
    format_tool_call("mkdir", {"dir_name": "coevolve_notes"}),
    format_tool_call("cd", {"folder": "coevolve_notes"}),
    format_tool_call("touch", {"file_name": "todo.txt"}),
    format_tool_call("echo", {"content": "buy milk", "file_name": "todo.txt"}),
]


def bfcl_teacher(stage: str, messages: list[dict[str, Any]]) -> str:
    user = messages[-1]["content"]
    if stage == "reflect":
        return json.dumps({
            "summary": "The agent was asked to organise files and stopped after listing the folder.",
            "failure_cause": "It never created the folder nor wrote the file.",
            "instability_pattern": "Reads the directory, then answers without acting.",
            "focus_pattern": ["mkdir>cd>touch>echo"], "exploration_objectives": ["create folders and files", "write into files"],
            "do_not_repeat": ["answering before acting"], "focus_tools": ["mkdir", "touch", "echo"],
        })
    if stage == "explore":
        k = len(re.findall(r"^Action: ", user, flags=re.MULTILINE))
        return f"Next I build the folder structure.\n<action>\n{PLAN[k % len(PLAN)]}\n</action>"
    if stage == "abstract":
        return json.dumps({"tasks": [
            {"description": "Create a notes folder with a to-do file.",
             "query": "Make a folder called coevolve_notes, go into it, create todo.txt and write 'buy milk' in it.",
             "reference_actions": PLAN, "completion_criterion": "todo.txt in coevolve_notes holds 'buy milk'"},
            {"description": "Impossible: a tool that does not exist.",
             "query": "Teleport the report to the moon.",
             "reference_actions": [format_tool_call("teleport", {"what": "report"})] * 3, "completion_criterion": "-"},
        ]})
    raise AssertionError(stage)


def test_signal_to_admitted_bfcl_task_graded_by_the_official_checker(scripted, tmp_path: Path) -> None:
    from coevolve_bfcl.env import BFCLMultiTurnEnv
    from coevolve_litellm import LiteLLMTeacher

    def make_env() -> BFCLMultiTurnEnv:
        return BFCLMultiTurnEnv(tool_docs="compact")

    env = make_env()
    base = next(t for t in env.tasks("train") if t.payload["entry"]["involved_classes"] == ["GorillaFileSystem"])
    replay = env.replay(base, base.reference_actions[:1])
    traj = Trajectory(task_id=base.id, env=env.name, steps=replay.steps, score=replay.score, success=False)
    sig = Signal(kind="forgetting", task_id=base.id, trajectory_id=traj.id, step=10, reason="solved at step 5, failed now")

    script = scripted(bfcl_teacher)
    teacher = LiteLLMTeacher(LiteLLMTeacher.Options(model="scripted/teacher", rounds=1, steps_per_round=4))
    store = RunStore(tmp_path / "run.sqlite")
    evolver = Evolver(teacher, Validator(), make_env, store, workers=1)
    result = evolver.run_round(1, 10, [sig], {traj.id: traj}, {base.id: base}, existing=set())

    assert set(script.stages()) >= {"reflect", "explore", "abstract"}, (result.failures, teacher.failures, [c["messages"][-1]["content"][-600:] for c in script.calls[-2:]])
    assert result.candidates == 2 and len(result.accepted) == 1 and result.rejected == 1
    task = result.accepted[0]
    assert task.lineage and task.lineage.teacher == "litellm" and task.lineage.prompt_version
    assert task.lineage.signal_kind == "forgetting" and task.lineage.trajectory_id == traj.id
    # graded by BFCL's official multi_turn_checker, through a fresh environment
    assert make_env().replay(task, task.reference_actions).score == 1.0
    assert task.reference_actions[:-1] == PLAN  # the turn closes with a plain answer
    assert make_env().replay(task, PLAN[:-1] + task.reference_actions[-1:]).score == 0.0
    reasons = [v["reason"] for v in store.verdicts(accepted=False)]
    assert reasons and ("teleport" in reasons[0] or "could not instantiate" in reasons[0])
    usage = store.usage_rows()
    assert usage[0]["calls"] == len(script.calls) and usage[0]["task_ids"] == [task.id]
