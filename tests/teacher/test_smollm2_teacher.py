"""The LiteLLM teacher answered by a real model: SmolLM2-135M-Instruct in this process through
litellm's custom-provider interface (coevolve_grpo.litellm_local), on the warehouse.

Whatever a 135M model answers, every stage returns (reflect falls back to a context built from
the trajectory, explore notes unusable replies, abstract drops what does not parse), the counts
say what happened, and only candidates the validator accepted by execution become tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.components.context import RunContext
from coevolve_sdk.records import Signal, Step, Trajectory
from coevolve_sdk.evolution.validation import Validator
from tests.grpo.smollm2 import smollm2_folder


@pytest.fixture
def local_provider(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    import litellm

    smollm2_folder()  # skips without the wheel
    monkeypatch.setattr(litellm, "custom_provider_map", list(litellm.custom_provider_map))
    monkeypatch.setattr(litellm, "provider_list", list(litellm.provider_list))
    monkeypatch.setattr(litellm, "_custom_providers", list(litellm._custom_providers))
    import torch

    torch.set_num_threads(1)
    from coevolve_grpo import litellm_local

    litellm.custom_provider_map = [p for p in litellm.custom_provider_map if p.get("provider") != litellm_local.PROVIDER]
    litellm_local.register()
    return litellm_local


@pytest.mark.slow
def test_real_model_teacher_stages_complete_and_only_validated_tasks_are_admitted(local_provider, tmp_path: Path) -> None:
    from coevolve_litellm import LiteLLMTeacher, LiteLLMTeacherOptions
    from coevolve_warehouse.env import WarehouseEnv

    env = WarehouseEnv({"max_steps": 4, "tool_docs": "compact"})
    task = env.tasks("train")[0]
    ctx = RunContext(run_dir=tmp_path, seed=0, make_env=lambda: WarehouseEnv({"max_steps": 4}), log=lambda m: None)
    teacher = LiteLLMTeacher(LiteLLMTeacherOptions(
        model="coevolve-hf/smollm2-135m", temperature=0.7, max_tokens=64, timeout=300, retries=0, concurrency=1,
        rounds=1, steps_per_round=2, min_actions=2, max_candidates=2), ctx)
    first = task.reference_actions[0]
    traj = Trajectory(task_id=task.id, env="warehouse", score=0.0, success=False, action_pattern="count",
                      steps=[Step(action=first, observation="3", info={"tool_names": ["count"]}),
                             Step(action="Done.", observation="Episode finished.")])
    sig = Signal(kind="forgetting", task_id=task.id, trajectory_id=traj.id, step=4, reason="solved at step 2, failed now")

    context = teacher.reflect(sig, traj, task)
    triplets = teacher.explore(env, task, context, seed=1)
    cands = teacher.abstract(env, task, triplets, context, existing={task.fingerprint()})

    counts = teacher.stage_counts
    assert counts["reflect"]["replies"] == 1
    assert counts["reflect"].get("parsed", 0) + counts["reflect"].get("parse_failures", 0) == 1
    assert 1 <= counts["explore"]["replies"] <= 2
    assert counts["explore"]["replies"] == counts["explore"].get("actions", 0) + counts["explore"].get("unusable", 0)
    assert len(triplets) == counts["explore"].get("actions", 0)
    if any(t.ok for t in triplets):
        a = counts["abstract"]
        assert a["replies"] == 1 and a.get("proposed", 0) == len(cands)
    else:
        assert counts["abstract"] == {"skipped_no_ok_action": 1}
    # the record in the run folder says the same
    saved = json.loads((tmp_path / "teacher-stages.json").read_text())
    assert saved["stages"] == counts and saved["model"] == "coevolve-hf/smollm2-135m"
    # what the model said is kept, parsed or not: the first replies of each stage that got one
    assert len(saved["reply_samples"]["reflect"]) == 1 and len(saved["reply_samples"]["explore"]) >= 1
    # and so does what each evolution round stores and the report shows
    record = teacher.stages()
    assert record.stages == counts and record.replies == saved["reply_samples"]
    assert teacher.spent.calls == sum(c.get("replies", 0) for c in counts.values())

    validator = Validator()
    for c in cands:
        verdict, new = validator.validate(WarehouseEnv({"max_steps": 8}), c, task, {task.fingerprint()})
        assert (new is not None) == verdict.accepted
        if new is not None:  # admitted only when its reference actions really do the task
            check = WarehouseEnv({"max_steps": 8})
            check.reset(seed=0, options={"task": new})
            for a in new.reference_actions:
                check.step(a)
            assert check.grade() >= check.success_threshold


@pytest.mark.slow
def test_the_request_timeout_bounds_local_generation(local_provider) -> None:
    import litellm

    before = dict(local_provider.counts.get("smollm2-135m", {}))
    r = litellm.completion(model="coevolve-hf/smollm2-135m", messages=[{"role": "user", "content": "Count to one thousand."}],
                           max_tokens=4000, temperature=0.0, timeout=0.05)
    after = local_provider.counts["smollm2-135m"]
    assert after["requests"] == before.get("requests", 0) + 1
    assert after["time"] == before.get("time", 0) + 1  # cut by time, far before 4000 tokens
    assert r.usage.completion_tokens < 4000 and r.choices[0].finish_reason == "length"
    ok = litellm.completion(model="coevolve-hf/smollm2-135m", messages=[{"role": "user", "content": "Say hello."}],
                            max_tokens=24, temperature=0.0)
    assert isinstance(ok.choices[0].message.content, str) and ok.usage.completion_tokens <= 24
