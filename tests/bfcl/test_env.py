"""Behaviour of the BFCL environment: turns, tools, errors, splits, grading hygiene, gymnasium."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium
import pytest

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.records import Trajectory

from coevolve_bfcl import _bfcl
from coevolve_bfcl.env import BFCLMultiTurnEnv, split_of

from .helpers import CATEGORIES, make_env


def _task(env, entry_id):
    return next(t for t in env.tasks("all") if t.id == entry_id)


def test_opening_messages_and_tool_call_execution():
    env = make_env()
    t = _task(env, "multi_turn_base_0")
    obs, info = env.reset(options={"task": t})
    msgs = info["messages"]
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "<tool_call>" in msgs[0]["content"]
    assert msgs[1]["content"].startswith("Move 'final_report.pdf'")
    assert {x["function"]["name"] for x in info["tools"]} >= {"cd", "mkdir", "post_tweet"}
    # two calls in one message, both executed in order; results come back as tool messages
    action = format_tool_call("cd", {"folder": "document"}) + "\n" + format_tool_call("ls", {})
    obs, reward, term, trunc, info = env.step(action)
    assert [m["role"] for m in info["messages"]] == ["tool", "tool"]
    assert json.loads(info["messages"][0]["content"]) == {"current_working_directory": "document"}
    assert "final_report.pdf" in info["messages"][1]["content"]
    assert info["tool_names"] == ["cd", "ls"] and "error" not in info
    assert (reward, term, trunc) == (0.0, False, False)
    # the default action pattern counts the executed function names in order
    traj = Trajectory(task_id=t.id, steps=env.steps)
    assert env.action_pattern(traj) == "cd>ls"


@pytest.mark.parametrize("action, fragment", [
    ('<tool_call>{"name": "cd", "arguments": {"folder": 3}}</tool_call>', "must be a string"),
    ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', "no tool named"),
    ('<tool_call>{"name": "cd", "arguments": {}}</tool_call>', "missing required"),
    ('<tool_call>{"name": "cd", "arguments": {"folder": "x", "evil": 1}}</tool_call>', "no parameter"),
    ('<tool_call>{"name": "cd", "arguments": {"folder": "x"</tool_call>', "not valid JSON"),
    ("[cd(folder=__import__('os').getcwd())]", "plain literal"),
    ("[os.system('ls')]", "plain function names"),
    ("[cd(folder='x'", "does not parse"),
    ('<tool_call>{"name": "cd", "arguments": {"folder": "nowhere"}}</tool_call>', "No such"),
])
def test_bad_actions_become_error_observations(action, fragment):
    env = make_env()
    env.reset(options={"task": _task(env, "multi_turn_base_0")})
    _, _, term, _, info = env.step(action)
    assert info.get("error"), info
    text = " ".join(m["content"] for m in info["messages"])
    assert fragment.lower() in (text + info["error"]).lower()
    assert not term and env.model_calls()[0] in ([], [["cd(folder='nowhere')"]])


def test_a_message_runs_its_valid_calls_and_answers_each_invalid_one_in_place():
    env = make_env()  # invalid_calls="skip", BFCL's way
    env.reset(options={"task": _task(env, "multi_turn_base_0")})
    action = "\n".join([format_tool_call("cd", {"folder": "document"}),
                         format_tool_call("rm_rf", {}),
                         format_tool_call("cd", {"folder": 7}),
                         format_tool_call("ls", {})])
    _, _, term, _, info = env.step(action)
    assert not term
    msgs = info["messages"]
    assert [m["name"] for m in msgs] == ["cd", "error", "error", "ls"]  # one result per call, in order
    assert json.loads(msgs[0]["content"]) == {"current_working_directory": "document"}
    assert "no tool named 'rm_rf'" in msgs[1]["content"] and "must be a string" in msgs[2]["content"]
    assert "final_report.pdf" in msgs[3]["content"]  # ls ran after the refused calls, inside 'document'
    assert info["tool_names"] == ["cd", "ls"]
    assert "rm_rf" in info["error"] and "string" in info["error"]
    # only the calls that ran reach BFCL's checker
    assert env.model_calls()[0] == [["cd(folder='document')", "ls()"]]


def test_a_message_with_only_invalid_calls_leaves_no_trace_for_the_checker():
    env = make_env()
    env.reset(options={"task": _task(env, "multi_turn_base_0")})
    _, _, _, _, info = env.step(format_tool_call("rm_rf", {}) + format_tool_call("cd", {}))
    assert [m["name"] for m in info["messages"]] == ["error", "error"] and info["tool_names"] == []
    assert env.model_calls()[0] == []


def test_refuse_message_runs_nothing_of_a_message_with_an_invalid_call():
    env = make_env(invalid_calls="refuse_message")
    env.reset(options={"task": _task(env, "multi_turn_base_0")})
    action = format_tool_call("cd", {"folder": "document"}) + format_tool_call("rm_rf", {})
    _, _, _, _, info = env.step(action)
    assert len(info["messages"]) == 1 and "nothing was run" in info["messages"][0]["content"]
    assert "no tool named 'rm_rf'" in info["error"]
    assert env.model_calls()[0] == []
    _, _, _, _, info = env.step(format_tool_call("pwd", {}))
    assert "document" not in info["messages"][0]["content"]  # the cd never ran


def test_plain_answer_moves_to_next_turn_and_episode_ends_after_last():
    env = make_env()
    t = _task(env, "multi_turn_base_0")
    env.reset(options={"task": t})
    n = len(t.payload["entry"]["question"])
    for k in range(n - 1):
        _, _, term, _, info = env.step("I am done.")
        assert not term and info["messages"][-1]["role"] == "user"
        assert info["messages"][-1]["content"] == t.payload["entry"]["question"][k + 1][0]["content"]
    _, reward, term, _, info = env.step("Done.")
    assert term and reward == 0.0 and info["bfcl"]["valid"] is False
    assert info["bfcl"]["error_type"] == "multi_turn:empty_turn_model_response"


def test_miss_func_function_appears_at_its_turn():
    env = make_env(category="miss_func", hidden_callable=False)
    t = _task(env, "multi_turn_miss_func_0")
    turn = int(next(iter(t.payload["entry"]["missed_function"])))
    held = t.payload["entry"]["missed_function"][str(turn)]
    env.reset(options={"task": t})
    assert not set(held) & {s.name for s in env.tools()}
    _, _, _, _, info = env.step(format_tool_call(held[0], {"file_name": "final_report.pdf"}))
    assert "no tool named" in info["error"]
    for _ in range(turn):
        _, _, _, _, info = env.step("Finished.")
    assert set(held) <= {s.name for s in env.tools()}
    assert "New tools are now available" in info["messages"][-1]["content"]
    assert held[0] in info["messages"][-1]["content"]


def test_per_turn_step_limit_moves_on_and_fails_like_bfcl():
    # (tests/bfcl/test_step_limit.py compares the limit with BFCL's own harness at 19-22 messages)
    env = make_env(max_steps_per_turn=2)
    t = _task(env, "multi_turn_base_0")
    env.reset(options={"task": t})
    env.step(format_tool_call("pwd", {}))
    _, _, _, _, info = env.step(format_tool_call("pwd", {}))
    assert not info.get("step_limit_hit")  # the limit is reached, not yet exceeded
    _, _, _, _, info = env.step(format_tool_call("pwd", {}))
    assert info["step_limit_hit"] and info["messages"][-1]["role"] == "user"
    assert env.grade()["force_terminated"] and env.grade()["step_limit_turn"] == 0
    # the rest of the ground truth cannot make the episode pass: it was force-terminated
    r = env.replay(t, t.reference_actions)  # fresh episode: passes
    assert r.score == 1.0
    env2 = make_env(max_steps_per_turn=2, step_limit_fails=False)
    env2.reset(options={"task": t})
    for _ in range(3):
        env2.step(format_tool_call("pwd", {}))
    assert env2.grade()["force_terminated"] and env2.grade()["error_type"] != "multi_turn:force_terminated"


def test_compact_and_involved_tools_are_smaller_and_keep_the_answer_functions():
    full = make_env()
    small = make_env(tool_docs="compact", tool_subset="involved", distractors=2)
    t = _task(full, "multi_turn_base_0")
    full.reset(options={"task": t})
    small.reset(options={"task": t})
    size = lambda env: len(json.dumps([s.as_openai() for s in env.tools()]))
    assert size(small) * 5 < size(full)
    gt_names = {c.split("(")[0] for turn in t.payload["entry"]["ground_truth"] for c in turn}
    names = {s.name for s in small.tools()}
    assert gt_names <= names and len(names) == len(gt_names) + 2
    # the smaller surface still replays the ground truth
    assert small.replay(t, t.reference_actions).score == 1.0
    # compact docs keep types and required lists
    cd = next(s for s in small.tools() if s.name == "cd")
    assert cd.parameters["properties"]["folder"] == {"type": "string"} and cd.parameters["required"] == ["folder"]


def test_splits_are_deterministic_disjoint_and_shared_across_categories():
    for cat in CATEGORIES:
        env = make_env(category=cat)
        train = {t.id for t in env.tasks("train")}
        test = {t.id for t in env.tasks("test")}
        assert train and test and not train & test and len(train | test) == 200
        assert {t.split for t in env.tasks("train")} == {"train"}
    num = lambda ids: {i.rsplit("_", 1)[1] for i in ids}
    base_test = num(t.id for t in make_env(category="base").tasks("test"))
    for cat in CATEGORIES[1:]:
        assert num(t.id for t in make_env(category=cat).tasks("test")) == base_test
    assert split_of("multi_turn_base_17") == split_of("multi_turn_long_context_17")
    assert 70 < len(base_test) < 130


def test_grading_is_isolated_between_rollouts():
    env = make_env()
    t = _task(env, "multi_turn_base_0")
    bad = [format_tool_call("cd", {"folder": "document"}) + format_tool_call("mkdir", {"dir_name": "oops"}), "ok"]
    for _ in range(2):
        assert env.replay(t, bad).score == 0.0
        assert env.replay(t, t.reference_actions).score == 1.0
    utils = _bfcl.module("eval_checker.multi_turn_eval.multi_turn_utils")
    assert not [k for k in vars(utils) if k.startswith("coevolve_") and k.endswith("_instance")]


def test_progress_counts_turns_passed():
    env = make_env()
    t = _task(env, "multi_turn_base_0")
    actions = t.reference_actions[:2] + ["skip"] * 10
    env.replay(t, actions)
    g = env.grade()
    assert g["turns_passed"] == 1 and 0 < g["progress"] < 1 and not g["valid"]


def test_gymnasium_make_and_check_env():
    import coevolve_sdk

    assert "coevolve/bfcl-multi-turn-v0" in coevolve_sdk.register_gym_envs()
    env = gymnasium.make("coevolve/bfcl-multi-turn-v0", category="miss_param", tool_docs="compact")
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and info["task_id"].startswith("multi_turn_miss_param_")
    from gymnasium.utils.env_checker import check_env

    check_env(env.unwrapped)
    env.close()


def test_plugin_registers_and_imports_without_bfcl(tmp_path):
    code = (
        "import sys\n"
        "from coevolve_sdk.components.registry import Registry\n"
        "r = Registry()\n"
        "cls = r.get('environment', 'bfcl-multi-turn')\n"
        "assert r.info('environment', 'bfcl-multi-turn').distribution == 'coevolve-bfcl'\n"
        "assert 'bfcl_eval' not in sys.modules, 'plugin import loaded bfcl_eval'\n"
        "e = cls({'category': 'base'})\n"
        "assert 'bfcl_eval' not in sys.modules\n"
        "print(cls.gym_id())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__('os').environ, "BFCL_PROJECT_ROOT": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "coevolve/bfcl-multi-turn-v0"


def test_project_root_is_set_before_bfcl_import(tmp_path):
    code = (
        "import os, sys\n"
        "from coevolve_sdk.components.context import RunContext\n"
        "from coevolve_bfcl.env import BFCLMultiTurnEnv\n"
        f"env = BFCLMultiTurnEnv({{}}, RunContext(run_dir=__import__('pathlib').Path({str(tmp_path)!r})))\n"
        "t = env.tasks('train')[0]\n"
        "env.reset(options={'task': t})\n"
        "print(os.environ['BFCL_PROJECT_ROOT'])\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "BFCL_PROJECT_ROOT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    root = out.stdout.strip()
    assert root == str(tmp_path / "bfcl")
    assert (__import__("pathlib").Path(root) / "result").is_dir()


def test_options_are_validated():
    with pytest.raises(Exception):
        BFCLMultiTurnEnv(category="nope")
    with pytest.raises(ValueError):
        make_env().tasks("validation")
