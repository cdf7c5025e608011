"""The contract checker passes a good environment and names each broken contract, with its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from coevolve_kvstore import KVStoreEnv

from coevolve_sdk.authoring.check import CONTRACTS, EnvCheckError, check_env, malformed_actions
from tests.toolenv import broken_envs as b
from tests.toolenv.test_toolenv import Lamps

REPO = Path(__file__).resolve().parents[2]


class GoodLamps(Lamps):
    name = ""

    def explode(self, room: str) -> str:  # redefined without @tool: no longer a tool
        return room


def test_good_environments_pass_every_contract() -> None:
    for env in (KVStoreEnv, KVStoreEnv(max_steps=4), GoodLamps):
        report = check_env(env)
        assert report.ok and [r.name for r in report.results] == list(CONTRACTS)
        assert all(r.status == "passed" for r in report.results), str(report)


def failed(env: type, **kw: object) -> dict[str, str]:
    report = check_env(env, raise_on_failure=False, **kw)  # type: ignore[arg-type]
    return {r.name: f"{r.message} | fix: {r.fix} | {' / '.join(r.details)}" for r in report.failed}


def test_a_task_whose_reference_actions_fail() -> None:
    f = failed(b.FailingReference)
    assert set(f) == {"replay"}
    assert "1 of 80 tasks do not replay to success: task 'kv-0-2' (train): a reference action failed: no key 'no-such-key'" in f["replay"]


def test_begin_returning_the_wrong_type() -> None:
    f = failed(b.WrongBegin)
    assert "begin" in f and "80 of 80 tasks cannot start an episode: task 'kv-0-0': begin returned 'Remove plums" in f["begin"]
    assert "(str)" in f["begin"] and "returns [{'role': 'system'" in f["begin"]


def test_tasks_returning_dicts() -> None:
    f = failed(b.DictTasks)
    assert "tasks('train'): item 0 of the list it returned is a dict, not a coevolve_sdk.Task; build Task(...) records (Task.model_validate(d)" in f["tasks"]
    report = check_env(b.DictTasks, raise_on_failure=False)
    assert report.result("replay").status == "skipped" and "needs begin" in report.result("replay").message


def test_sample_action_producing_invalid_actions() -> None:
    f = failed(b.BadSampler)
    assert set(f) >= {"sample_action"}
    assert "48 of 48 sampled actions were rejected by the environment" in f["sample_action"] and "no key 'missing-" in f["sample_action"]
    assert "draw only actions that are valid in the live state" in f["sample_action"]


def test_act_raising_on_bad_input() -> None:
    f = failed(b.RaisingAct)
    assert set(f) == {"malformed"}
    assert "malformed actions were not handled: act() raised on '<tool_call>': IndexError: list index out of range" in f["malformed"]


def test_a_toolenv_tool_that_raises_something_else_than_tool_error() -> None:
    f = failed(Lamps)
    assert set(f) == {"malformed"} and "a tool raised on" in f["malformed"] and "tool 'explode' raised KeyError" in f["malformed"]
    assert "raise ToolError in a tool for the agent's mistakes" in f["malformed"]


def test_step_raising_on_bad_input() -> None:
    f = failed(b.RaisingStep)
    assert "malformed" in f and "step('') raised ValueError: empty action" in f["malformed"]


def test_check_env_raises_with_the_whole_report_by_default() -> None:
    with pytest.raises(EnvCheckError) as info:
        check_env(b.DictTasks)
    text = str(info.value)
    assert "[FAIL] tasks" in text and "fix: tasks(split) must return a list of coevolve_sdk.Task records" in text
    assert isinstance(info.value, AssertionError)  # pytest shows it as a failed assertion


def test_an_environment_that_cannot_be_built() -> None:
    class NeedsFile(KVStoreEnv):
        name = ""

        def __init__(self, *a: object, **k: object) -> None:
            raise FileNotFoundError("data/tasks.json")

    report = check_env(NeedsFile, raise_on_failure=False)
    assert report.result("construct").status == "failed" and "FileNotFoundError: data/tasks.json" in report.result("construct").message
    assert all(r.status == "skipped" for r in report.results[1:])


def test_malformed_actions_are_deterministic_and_cover_each_tool() -> None:
    tools = KVStoreEnv().tools()
    a, c = malformed_actions(tools, 300, seed=0), malformed_actions(tools, 300, seed=0)
    assert a == c and len(a) == 300
    assert any('"name": "increment"' in x and '"amount": null' in x for x in a)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COEVOLVE_PLUGIN_MODULES="tests.toolenv.broken_envs", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "coevolve_sdk", "check", "env", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_cli_check_env_exit_status_and_report() -> None:
    ok = _cli("kvstore", "--max-tasks", "5", "--malformed", "50")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "All contracts hold." in ok.stdout
    bad = _cli("broken-kv", "--max-tasks", "5", "--json")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    data = json.loads(bad.stdout)
    assert data["ok"] is False and [r["name"] for r in data["results"] if r["status"] == "failed"] == ["malformed"], bad.stdout
    typo = _cli("kvstore", "-o", "max_stepz=3")
    assert typo.returncode == 2 and "bad --option for environment 'kvstore': max_stepz" in typo.stderr and "Traceback" not in typo.stderr
    unknown = _cli("kvstor")
    assert unknown.returncode == 2 and "kvstore" in unknown.stderr and "Traceback" not in unknown.stderr
