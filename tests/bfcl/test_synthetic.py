"""Synthetic tasks: random exploration from train base states, validation by replay, and
grading of the resulting BFCL-format entries by BFCL's own checker."""

from __future__ import annotations

import numpy as np

from coevolve_sdk.env.actions import parse_tool_calls
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.records import CandidateTask, Step
from coevolve_sdk.evolution.validation import Validator

from coevolve_bfcl import _bfcl

from .helpers import make_env


def test_sample_action_draws_valid_calls_from_live_state():
    env = make_env()
    t = next(x for x in env.tasks("all") if x.id == "multi_turn_base_0")
    env.reset(seed=0, options={"task": t})
    visible = {s.name for s in env.tools()}
    ok = 0
    for _ in range(60):
        a = env.sample_action()
        (call,) = parse_tool_calls(a)  # the <tool_call> JSON format, one call
        assert call.name in visible
        _, _, _, _, info = env.step(a)
        ok += not info.get("error")
        assert len(info["calls"]) == 1, info  # its arguments always pass the checks, so the call ran
        if env.done:
            env.reset(options={"task": t})
    assert ok >= 30
    # file names come from the live file system: after cd into 'document', its files are offered
    env.reset(seed=1, options={"task": t})
    env.step('<tool_call>{"name": "cd", "arguments": {"folder": "document"}}</tool_call>')
    from coevolve_bfcl.sampling import sample_value

    rng = np.random.default_rng(0)
    names = {sample_value(env, "cat", "file_name", {"type": "string"}, rng) for _ in range(30)}
    assert names & {"final_report.pdf", "previous_report.pdf"}


def test_sampling_is_reproducible_with_the_seed():
    def run(seed):
        env = make_env()
        t = env.tasks("train")[3]
        env.reset(seed=seed, options={"task": t})
        out = []
        for _ in range(8):
            a = env.sample_action()
            out.append(a)
            env.step(a)
        return out

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_random_exploration_tasks_validate_and_are_graded_by_the_official_checker():
    env = make_env()
    bases = env.tasks("train")
    by_id = {b.id: b for b in bases}
    teacher = RandomExplorer(RandomExplorer.Options(rounds=2, steps_per_round=6))
    cands = teacher.seed_tasks(env, bases[:12], n=10, existing=set(), seed=7)
    assert len(cands) == 10
    validator = Validator()
    accepted = []
    for c in cands:
        verdict, task = validator.validate(make_env(), c, by_id[c.parent_task_id], set())
        assert verdict.accepted, verdict.reason
        accepted.append(task)
    for task in accepted:
        entry = task.payload["entry"]
        assert task.origin == "synthetic" and task.split == "train"
        assert entry["id"].startswith("multi_turn_base_syn") and len(entry["question"]) == 1
        assert entry["initial_config"] == by_id[task.payload["base_id"]].payload["entry"]["initial_config"]
        gt = entry["ground_truth"]
        assert len(gt) == 1 and len(gt[0]) >= 3
        # graded by BFCL's checker directly: the reference calls pass ...
        assert _bfcl.official_check([[gt[0]]], entry)["valid"]
        # ... and an answer without any call fails
        assert not _bfcl.official_check([[]], entry)["valid"]
        # the query is the templater's plain-language request
        assert task.query.startswith("Please")
    # a fresh environment replays the task, and solving it with the plain python syntax works too
    t = accepted[0]
    fresh = make_env()
    assert fresh.replay(t, t.reference_actions).score == 1.0
    assert fresh.replay(t, ["[" + ", ".join(t.payload["entry"]["ground_truth"][0]) + "]"]).score == 1.0


def test_wrong_solution_of_a_synthetic_task_fails():
    env = make_env()
    base = next(t for t in env.tasks("train") if "GorillaFileSystem" in t.payload["entry"]["involved_classes"])
    actions = [
        '<tool_call>{"name": "mkdir", "arguments": {"dir_name": "alpha"}}</tool_call>',
        '<tool_call>{"name": "cd", "arguments": {"folder": "alpha"}}</tool_call>',
        '<tool_call>{"name": "touch", "arguments": {"file_name": "notes.txt"}}</tool_call>',
    ]
    cand = CandidateTask(query=env.describe(base, [Step(action=a, observation="") for a in actions]),
                         reference_actions=actions)
    task = env.make_task(cand, base)
    assert "create a folder named 'alpha'" in task.query and "notes.txt" in task.query
    assert env.replay(task, actions).score == 1.0
    assert env.replay(task, actions[:2] + ['<tool_call>{"name": "touch", "arguments": {"file_name": "other.txt"}}</tool_call>']).score == 0.0
    assert env.replay(task, actions[:2]).score == 0.0


def test_long_context_synthetic_tasks_keep_long_context_loading():
    env = make_env(category="long_context")
    base = env.tasks("train")[0]
    env.reset(seed=0, options={"task": base})
    actions = []
    while len(actions) < 3:
        a = env.sample_action()
        _, _, _, _, info = env.step(a)
        if not info.get("error"):
            actions.append(a)
    task = env.make_task(CandidateTask(query="q", reference_actions=actions), base)
    assert "long_context" in task.payload["entry"]["id"].rsplit("_", 1)[0]
    assert make_env(category="long_context").replay(task, actions).score == 1.0
