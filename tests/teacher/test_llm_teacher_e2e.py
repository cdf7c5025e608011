"""End to end: signal -> reflect -> explore -> abstract -> Validator, through litellm's real path."""

from __future__ import annotations

import json

import pytest
from .teacher_script import REFLECTION, SEED_ACTIONS, good_teacher

from coevolve_litellm import LiteLLMTeacher, LiteLLMTeacherOptions
from coevolve_sdk.evolution.teacher import usage_meter
from coevolve_sdk.records import TeacherUsage
from coevolve_sdk.evolution.validation import Validator


def make_teacher(**kw) -> LiteLLMTeacher:
    base = dict(model="scripted/teacher-v1", rounds=2, steps_per_round=5, retries=2, backoff_s=0.0)
    base.update(kw)
    return LiteLLMTeacher(LiteLLMTeacherOptions(**base))


def test_signal_becomes_admitted_tasks(scripted, env, seed_task, signalled):
    provider = scripted(good_teacher)
    teacher = make_teacher()
    sig, traj = signalled
    with usage_meter() as meter:
        ctx = teacher.reflect(sig, traj, seed_task)
        triplets = teacher.explore(env, seed_task, ctx, seed=1)
        cands = teacher.abstract(env, seed_task, triplets, ctx, existing={seed_task.fingerprint()})

    # reflection parsed from a fenced JSON block
    assert ctx.signal_kind == "forgetting"
    assert ctx.summary == REFLECTION["summary"]
    assert ctx.focus_tools == ["set"] and ctx.do_not_repeat == ["stopping after a read"]
    # exploration: 2 rounds x 5 steps, each the env's real answer to the proposed action
    assert [(t.round, t.step) for t in triplets] == [(r, k) for r in range(2) for k in range(5)]
    assert [t.action for t in triplets[:5]] == SEED_ACTIONS
    assert all(t.ok for t in triplets)
    assert triplets[1].observation == "ok: colour = green"
    assert triplets[0].observation == json.dumps({"colour": "red"})
    # the forgetting guidance, the context, the tools and the opening reached the explorer
    explore_prompt = next(c for c in provider.calls if c["stage"] == "explore")["messages"][-1]["content"]
    assert "rebuild a skill the agent has lost" in explore_prompt
    assert REFLECTION["failure_cause"] in explore_prompt
    assert '"list_keys"' in explore_prompt and seed_task.query in explore_prompt
    second = [c for c in provider.calls if c["stage"] == "explore"][1]["messages"][-1]["content"]
    assert "Observation: " + json.dumps({"colour": "red"}) in second

    assert len(cands) == 2
    for c in cands:
        assert c.teacher == "litellm" and c.prompt_version == "v1" and c.parent_task_id == seed_task.id
        assert c.signal_kind == "forgetting" and len(c.reference_actions) >= 3
        assert c.exploration["model"] == "scripted/teacher-v1" and c.exploration["steps"] == 10

    validator = Validator()
    existing = {seed_task.fingerprint()}
    admitted = []
    for c in cands:
        verdict, task = validator.validate(KVEnvFresh(), c, seed_task, existing)
        assert verdict.accepted, verdict.reason
        assert verdict.reason == "replay graded successful"
        existing.add(task.fingerprint())
        admitted.append(task)
    assert admitted[0].payload["goal"] == {"colour": "green", "owner": "bob"}
    assert admitted[1].payload["goal"] == {"colour": "green", "size": "small", "owner": "bob"}

    # usage: one record per request, summed by the meter and by the teacher
    assert provider.stages() == ["reflect"] + ["explore"] * 10 + ["abstract"]
    assert meter.calls == 12 and meter.failures == 0
    assert meter.prompt_tokens > 0 and meter.completion_tokens > 0
    assert meter.cost_usd == 0.0  # litellm has no price for a custom provider
    assert teacher.spent.calls == 12 and teacher.failures == []


def KVEnvFresh():
    from .teacher_kv_env import KVEnv

    return KVEnv()


def test_options_reach_litellm(scripted, env, seed_task, signalled, monkeypatch):
    monkeypatch.setenv("MY_TEACHER_KEY", "secret-123")
    provider = scripted(good_teacher)
    teacher = make_teacher(api_key_env="MY_TEACHER_KEY", temperature=0.2, max_tokens=77)
    teacher.reflect(*signalled, seed_task)
    call = provider.calls[0]
    assert call["model"] == "teacher-v1" and call["api_key"] == "secret-123"
    assert call["params"]["temperature"] == 0.2 and call["params"]["max_tokens"] == 77


def test_seed_tasks_use_generic_guidance(scripted, env, seed_task):
    provider = scripted(good_teacher)
    teacher = make_teacher(rounds=1)
    cands = teacher.seed_tasks(env, [seed_task], n=2, existing={seed_task.fingerprint()})
    assert len(cands) == 2 and all(c.signal_kind == "seed" for c in cands)
    explore_prompt = next(c for c in provider.calls if c["stage"] == "explore")["messages"][-1]["content"]
    assert "discover what can be done here" in explore_prompt


def test_judge_strict_and_optional(scripted, env, seed_task, signalled):
    replies = iter(["Success: true\nReason: matches", "**Success:** false\nReason: wrong key", "I think it went fine."])
    provider = scripted(lambda stage, m: next(replies))
    _, traj = signalled
    assert make_teacher().judge(seed_task, traj) is None  # disabled by default: no call
    assert provider.calls == []
    t = make_teacher(use_judge=True)
    assert t.judge(seed_task, traj) is True
    assert t.judge(seed_task, traj) is False
    assert t.judge(seed_task, traj) is None
    assert t.failures == ["judge: reply has no 'Success: true' or 'Success: false' line"]
    prompt = provider.calls[0]["messages"][-1]["content"]
    assert seed_task.reference_actions[0] in prompt and "tool calls" in prompt


def test_usage_with_litellm_prices_via_mock_response(env, seed_task, signalled):
    """mock_response goes through litellm's real cost code: a priced model costs money."""
    teacher = LiteLLMTeacher(
        LiteLLMTeacherOptions(model="gpt-4o-mini", completion_kwargs={"mock_response": json.dumps(REFLECTION)})
    )
    with usage_meter() as meter:
        ctx = teacher.reflect(*signalled, seed_task)
    assert ctx.summary == REFLECTION["summary"]
    assert meter.calls == 1 and meter.prompt_tokens > 0 and meter.completion_tokens > 0
    assert meter.cost_usd > 0
    assert teacher.spent == TeacherUsage(calls=1, prompt_tokens=meter.prompt_tokens, completion_tokens=meter.completion_tokens, cost_usd=meter.cost_usd)


def test_threads_share_the_concurrency_limit(scripted, seed_task, signalled):
    from concurrent.futures import ThreadPoolExecutor

    provider = scripted(good_teacher, delay_s=0.02)
    teacher = make_teacher(concurrency=2)
    with ThreadPoolExecutor(6) as pool:
        ctxs = list(pool.map(lambda _: teacher.reflect(*signalled, seed_task), range(12)))
    assert all(c.summary == REFLECTION["summary"] for c in ctxs)
    assert len(provider.calls) == 12 and teacher.spent.calls == 12
    assert 1 <= provider.max_in_flight <= 2


@pytest.mark.parametrize("kind,phrase", [("boundary", "border between success and failure"), ("rare", "rarely seen situation"), ("my-new-kind", "discover what can be done")])
def test_guidance_per_signal_kind(scripted, env, seed_task, kind, phrase):
    from coevolve_sdk.records import ExplorationContext

    provider = scripted(good_teacher)
    make_teacher(rounds=1, steps_per_round=1).explore(env, seed_task, ExplorationContext(signal_kind=kind, summary="s"))
    assert phrase in provider.calls[0]["messages"][-1]["content"]
