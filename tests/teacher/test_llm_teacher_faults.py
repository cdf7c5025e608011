"""Faults through litellm's real path: each one is counted, none crashes, synthesis goes on."""

from __future__ import annotations

import json
import pickle

import pytest
from .teacher_script import REFLECTION, good_teacher

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.errors import BudgetExhausted, CoEvolveError
from coevolve_litellm import LiteLLMTeacher, LiteLLMTeacherOptions, TeacherBudget
from coevolve_sdk.evolution.teacher import usage_meter
from coevolve_sdk.records import ExplorationContext, Triplet
from coevolve_sdk.evolution.validation import Validator


def make_teacher(**kw) -> LiteLLMTeacher:
    base = dict(model="scripted/teacher-v1", rounds=2, steps_per_round=5, retries=2, backoff_s=1.0)
    base.update(kw)
    t = LiteLLMTeacher(LiteLLMTeacherOptions(**base))
    t.delays = []  # type: ignore[attr-defined]
    t.sleep = t.delays.append  # record backoff delays instead of waiting
    return t


def rate_limited(model):
    import litellm

    return litellm.RateLimitError("429: slow down", llm_provider="scripted", model=model)


def timed_out(model):
    import litellm

    return litellm.Timeout("request timed out", model=model, llm_provider="scripted")


def server_error(model):
    import litellm

    return litellm.InternalServerError("503 upstream unavailable", llm_provider="scripted", model=model)


def flaky(n_bad, error):
    state = {"n": 0}

    def script(stage, messages):
        state["n"] += 1
        if state["n"] <= n_bad:
            return error
        return good_teacher(stage, messages)

    return script


@pytest.mark.parametrize("error", [rate_limited, timed_out, server_error])
def test_transient_errors_are_retried_with_backoff(scripted, seed_task, signalled, error):
    provider = scripted(flaky(2, error))
    teacher = make_teacher(retries=3)
    with usage_meter() as meter:
        ctx = teacher.reflect(*signalled, seed_task)
    assert ctx.summary == REFLECTION["summary"]
    assert len(provider.calls) == 3
    assert meter.calls == 3 and meter.failures == 0 and teacher.failures == []
    d0, d1 = teacher.delays
    assert 0.5 <= d0 <= 1.0 and 1.0 <= d1 <= 2.0  # doubling, with jitter


def test_retries_exhausted_is_a_counted_failure(scripted, seed_task, signalled):
    provider = scripted(lambda stage, m: rate_limited)
    teacher = make_teacher(retries=2)
    with usage_meter() as meter:
        ctx = teacher.reflect(*signalled, seed_task)
    # no crash: a context built from the trajectory, flagged in failures
    assert ctx.signal_kind == "forgetting" and "Reflection unavailable" in ctx.summary
    assert ctx.focus_tools == ["get"]
    assert len(provider.calls) == 3 and meter.calls == 3 and meter.failures == 1
    assert teacher.failures == [teacher.last_error]
    assert teacher.last_error.startswith("reflect: RateLimitError after 3 attempts")


def test_non_retryable_error_is_not_retried(scripted, seed_task, signalled):
    import litellm

    provider = scripted(lambda stage, m: (lambda model: litellm.AuthenticationError("bad key", llm_provider="scripted", model=model)))
    teacher = make_teacher(retries=4)
    teacher.reflect(*signalled, seed_task)
    assert len(provider.calls) == 1 and teacher.delays == []
    assert teacher.last_error.startswith("reflect: AuthenticationError")


def test_timeouts_during_exploration_end_rounds_not_the_run(scripted, env, seed_task):
    def script(stage, messages):
        if stage == "explore":
            return timed_out
        return good_teacher(stage, messages)

    scripted(script)
    teacher = make_teacher(retries=1, rounds=3)
    ctx = ExplorationContext(signal_kind="boundary", summary="s")
    with usage_meter() as meter:
        triplets = teacher.explore(env, seed_task, ctx)
    assert triplets == []
    assert meter.calls == 6 and meter.failures == 3  # 2 attempts per round, one failure per round
    assert all("Timeout after 2 attempts" in f for f in teacher.failures)


@pytest.mark.parametrize(
    "reply,reason",
    [
        ("", "reply is empty"),
        ("   \n", "reply is empty"),
        ("<think>let me see</think>", "reply is empty"),
        ("Sure! {summary: the agent failed", "reply holds no JSON object"),
        ("[1, 2, 3]", "reply holds JSON, but no JSON object (found a list)"),
        (json.dumps({"summary": ""}), "reflection JSON is invalid at 'summary'"),
        (json.dumps({"failure_cause": "x"}), "reflection JSON is invalid at 'summary'"),
        (json.dumps({"summary": "ok", "focus_pattern": {"a": 1}}), "reflection JSON is invalid at 'focus_pattern'"),
    ],
)
def test_malformed_or_empty_reflection(scripted, seed_task, signalled, reply, reason):
    scripted(lambda stage, m: reply)
    teacher = make_teacher()
    with usage_meter() as meter:
        ctx = teacher.reflect(*signalled, seed_task)
    assert "Reflection unavailable" in ctx.summary
    assert meter.calls == 1 and meter.failures == 1
    assert teacher.last_error.startswith("reflect: " + reason), teacher.last_error


def test_reflection_tolerates_prose_and_reasoning(scripted, seed_task, signalled):
    reply = "<think>{not json}</think>\nMy review: " + json.dumps({**REFLECTION, "extra": 1, "focus_tools": None}) + "\nHope this helps."
    scripted(lambda stage, m: reply)
    teacher = make_teacher()
    ctx = teacher.reflect(*signalled, seed_task)
    assert ctx.summary == REFLECTION["summary"] and teacher.failures == []
    assert ctx.focus_tools == ["get"]  # none named: the trajectory's tools


def test_explore_replies_without_action_are_counted_and_skipped(scripted, env, seed_task):
    replies = iter(["I would like to set something.", "<action> </action>", "ok\n<action>\n" + format_tool_call("set", {"key": "a", "value": "1"}) + "\n</action>"] * 10)
    provider = scripted(lambda stage, m: next(replies))
    teacher = make_teacher(rounds=1, steps_per_round=3, max_consecutive_bad_replies=3)
    triplets = teacher.explore(env, seed_task, ExplorationContext(signal_kind="rare", summary="s"))
    assert [t.action for t in triplets] == [format_tool_call("set", {"key": "a", "value": "1"})]
    assert teacher.failures == [
        "explore: round 0 step 0: reply has no <action>...</action> block",
        "explore: round 0 step 1: the <action> block is empty",
    ]
    # the model is told its reply was not used
    assert "your reply was not used (reply has no <action>" in provider.calls[1]["messages"][-1]["content"]


def test_explore_gives_up_a_round_after_consecutive_bad_replies(scripted, env, seed_task):
    provider = scripted(lambda stage, m: "no idea")
    teacher = make_teacher(rounds=2, steps_per_round=6, max_consecutive_bad_replies=2)
    assert teacher.explore(env, seed_task, ExplorationContext(signal_kind="rare", summary="s")) == []
    assert len(provider.calls) == 4 and len(teacher.failures) == 4


def test_impossible_actions_are_rejected_by_validation_with_a_reason(scripted, env, seed_task, signalled):
    impossible = [
        format_tool_call("set", {"key": "colour", "value": "green"}),
        format_tool_call("teleport", {"to": "mars"}),
        format_tool_call("set", {"key": "owner", "value": "bob"}),
    ]
    missing_key = [format_tool_call("delete", {"key": "weight"}), format_tool_call("set", {"key": "a", "value": "1"}), format_tool_call("get", {"key": "a"})]

    def script(stage, messages):
        if stage == "abstract":
            return json.dumps({"tasks": [
                {"description": "d", "query": "Go to mars and recolour.", "reference_actions": impossible, "completion_criterion": "c"},
                {"description": "d", "query": "Remove the weight and set a.", "reference_actions": missing_key, "completion_criterion": "c"},
            ]})
        return good_teacher(stage, messages)

    scripted(script)
    teacher = make_teacher(rounds=1, steps_per_round=3)
    ctx = teacher.reflect(*signalled, seed_task)
    triplets = teacher.explore(env, seed_task, ctx)
    cands = teacher.abstract(env, seed_task, triplets, ctx, set())
    assert len(cands) == 2
    from .teacher_kv_env import KVEnv

    verdicts = [Validator().validate(KVEnv(), c, seed_task, set())[0] for c in cands]
    assert [v.accepted for v in verdicts] == [False, False]
    assert verdicts[0].reason == "reference action failed: unknown tool 'teleport'"
    assert verdicts[1].reason == "reference action failed: no key 'weight'"


def test_environment_action_errors_are_recorded_not_fatal(scripted, env, seed_task):
    scripted(lambda stage, m: "<action>" + format_tool_call("fly", {}) + "</action>")
    teacher = make_teacher(rounds=1, steps_per_round=2)
    triplets = teacher.explore(env, seed_task, ExplorationContext(signal_kind="rare", summary="s"))
    assert [t.ok for t in triplets] == [False, False]
    assert "unknown tool 'fly'" in triplets[0].observation
    assert teacher.failures == []  # the model answered properly; the env said no
    # nothing worth abstracting: no request is spent on it
    assert teacher.abstract(env, seed_task, triplets, ExplorationContext(signal_kind="rare", summary="s"), set()) == []
    assert teacher.spent.calls == 2


@pytest.mark.parametrize(
    "reply,reason",
    [
        ("", "reply is empty"),
        ("Here are tasks: none really", "reply holds no JSON object or array"),
        (json.dumps({"items": []}), "abstraction JSON object has no 'tasks' list"),
        (json.dumps({"tasks": "none"}), "'tasks' is str, not a list"),
        (json.dumps({"tasks": [{"query": "q"}]}), "no usable task in the reply (task 1: 'reference_actions' Field required)"),
    ],
)
def test_malformed_abstraction(scripted, env, seed_task, reply, reason):
    scripted(lambda stage, m: reply)
    teacher = make_teacher()
    trip = [Triplet(action=format_tool_call("list_keys", {}), observation="[]", round=0)]
    with usage_meter() as meter:
        assert teacher.abstract(env, seed_task, trip, ExplorationContext(signal_kind="rare", summary="s"), set()) == []
    assert meter.failures == 1
    assert teacher.last_error == "abstract: " + reason


def test_abstraction_drops_short_duplicate_and_bad_items(scripted, env, seed_task):
    a = [format_tool_call("set", {"key": "k", "value": str(i)}) for i in range(4)]
    tasks = [
        {"query": "Set k twice.", "reference_actions": a[:2]},  # too short
        {"query": seed_task.query, "reference_actions": seed_task.reference_actions},  # the parent
        {"query": "Set k thrice.", "reference_actions": a[:3]},  # good
        {"query": "set K   thrice.", "reference_actions": a[:3]},  # same after normalisation
        {"query": "Bad.", "reference_actions": "not a list"},  # malformed item
        {"query": "As objects.", "reference_actions": [{"name": "set", "arguments": {"key": "z", "value": "1"}}] * 3},
    ]
    scripted(lambda stage, m: json.dumps(tasks))
    teacher = make_teacher(max_candidates=5)
    trip = [Triplet(action=a[0], observation="ok", round=0)]
    cands = teacher.abstract(env, seed_task, trip, ExplorationContext(signal_kind="rare", summary="s"), set())
    assert [c.query for c in cands] == ["Set k thrice.", "As objects."]
    assert cands[1].reference_actions == [format_tool_call("set", {"key": "z", "value": "1"})] * 3
    assert teacher.failures == []
    assert len(teacher.dropped) == 4
    assert "only 2 reference actions" in teacher.dropped[1]
    assert "repeats a task already in the pool" in teacher.dropped[2]


def test_existing_fingerprints_are_not_repeated(scripted, env, seed_task, signalled):
    scripted(good_teacher)
    teacher = make_teacher(rounds=1)
    ctx = teacher.reflect(*signalled, seed_task)
    trip = teacher.explore(env, seed_task, ctx)
    first = teacher.abstract(env, seed_task, trip, ctx, set())
    again = teacher.abstract(env, seed_task, trip, ctx, {c.fingerprint() for c in first})
    assert len(first) == 2 and again == []


@pytest.mark.parametrize(
    "budget,resource",
    [(TeacherBudget(max_calls=4), "calls"), (TeacherBudget(max_tokens=1), "tokens"), (TeacherBudget(max_cost_usd=0.0005), "cost_usd")],
)
def test_exhausted_budget_raises_and_is_counted(scripted, env, seed_task, signalled, budget, resource):
    provider = scripted(good_teacher)
    teacher = make_teacher(budget=budget, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    with usage_meter() as meter:
        with pytest.raises(BudgetExhausted) as info:
            ctx = teacher.reflect(*signalled, seed_task)
            triplets = teacher.explore(env, seed_task, ctx)
            teacher.abstract(env, seed_task, triplets, ctx, set())
    err = info.value
    assert isinstance(err, CoEvolveError) and err.resource == resource
    assert err.used >= err.limit
    assert meter.failures == 1 and len(teacher.failures) == 1
    assert teacher.failures[0].endswith(": " + str(err))
    assert meter.calls == len(provider.calls) == teacher.spent.calls
    if resource == "calls":
        assert len(provider.calls) == 4
    if resource == "cost_usd":
        assert teacher.spent.cost_usd >= 0.0005
        assert teacher.spent.cost_usd == pytest.approx(teacher.spent.prompt_tokens * 1e-6 + teacher.spent.completion_tokens * 2e-6)
    # spent stays spent: every later call raises at once, without a request
    n = len(provider.calls)
    with pytest.raises(BudgetExhausted):
        teacher.reflect(*signalled, seed_task)
    assert len(provider.calls) == n
    assert teacher.budget_left()[resource] == 0
    # raising the budget lets synthesis resume
    teacher.reset_budget(TeacherBudget())
    assert teacher.reflect(*signalled, seed_task).summary == REFLECTION["summary"]
    # the exception crosses process boundaries intact
    again = pickle.loads(pickle.dumps(err))
    assert (again.resource, again.limit, again.used, str(again)) == (err.resource, err.limit, err.used, str(err))


def test_budget_is_exact_under_threads(scripted, seed_task, signalled):
    from concurrent.futures import ThreadPoolExecutor

    provider = scripted(good_teacher, delay_s=0.005)
    teacher = make_teacher(budget=TeacherBudget(max_calls=7), concurrency=3)

    def one(_):
        try:
            teacher.reflect(*signalled, seed_task)
            return "ok"
        except BudgetExhausted:
            return "spent"

    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(one, range(15)))
    assert results.count("ok") == 7 and results.count("spent") == 8
    assert len(provider.calls) == 7


def test_budget_counts_retries(scripted, seed_task, signalled):
    provider = scripted(lambda stage, m: rate_limited)
    teacher = make_teacher(budget=TeacherBudget(max_calls=2), retries=5)
    with pytest.raises(BudgetExhausted):
        teacher.reflect(*signalled, seed_task)
    assert len(provider.calls) == 2


def test_exploration_budget_error_propagates_from_the_middle_of_a_round(scripted, env, seed_task):
    scripted(good_teacher)
    teacher = make_teacher(budget=TeacherBudget(max_calls=3))
    with pytest.raises(BudgetExhausted):
        teacher.explore(env, seed_task, ExplorationContext(signal_kind="rare", summary="s"))
    assert teacher.spent.calls == 3


def test_broken_environment_does_not_crash_exploration(scripted, env, seed_task):
    scripted(good_teacher)

    def boom(*a, **k):
        raise OSError("backend went away")

    env.reset = boom  # type: ignore[method-assign]
    teacher = make_teacher()
    assert teacher.explore(env, seed_task, ExplorationContext(signal_kind="rare", summary="s")) == []
    assert teacher.last_error == "explore: round 0: environment reset failed: OSError: backend went away"
