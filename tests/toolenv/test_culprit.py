"""Errors from plugin code name the component, the method, the task and the plugin's own lines."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from coevolve_kvstore import KVStoreEnv

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.components.blame import ComponentError, blame, component_kind
from coevolve_sdk.env.contract import checked_tasks
from coevolve_sdk.errors import ConfigError
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.records import CandidateTask, ExplorationContext, Task
from coevolve_sdk.evolution.validation import Validator
from tests.toolenv import broken_envs


class PayloadReader(KVStoreEnv):
    """Reads a payload key that seed tasks have and synthetic ones may not."""

    name = "payload-reader"

    def begin(self, task: Task) -> list[dict[str, Any]]:
        self.limit = task.payload["limit"]
        return super().begin(task)


class SamplerBug(KVStoreEnv):
    name = "sampler-bug"

    def sample_action(self) -> str:
        return format_tool_call("get", {"key": sorted(self.store)[99]})


def test_blame_names_component_method_task_and_only_plugin_frames() -> None:
    env = PayloadReader()
    task = env.tasks()[0]
    with pytest.raises(ComponentError) as info:
        with blame(env, "begin", task):
            env.begin(task)
    e = info.value
    assert e.headline == f"environment 'payload-reader' ({__name__}.PayloadReader) failed in begin() on task 'kv-0-0': KeyError: 'limit'"
    text = str(e)
    assert text.splitlines()[0] == e.headline
    assert __file__ in text and 'self.limit = task.payload["limit"]' in text
    assert "coevolve_sdk" not in "\n".join(e.frames)  # the SDK's frames are not the plugin's
    assert "--debug" in text and isinstance(e.__cause__, KeyError)


def test_user_errors_pass_through_and_interrupts_are_not_wrapped() -> None:
    with pytest.raises(ConfigError, match="as it was"):
        with blame(KVStoreEnv(), "tasks"):
            raise ConfigError("as it was")
    with pytest.raises(KeyboardInterrupt):
        with blame(KVStoreEnv(), "step"):
            raise KeyboardInterrupt


def test_component_error_survives_pickling() -> None:
    try:
        with blame(KVStoreEnv(), "score", "kv-0-1"):
            raise ZeroDivisionError("division by zero")
    except ComponentError as e:
        back = pickle.loads(pickle.dumps(e))
        assert str(back) == str(e) and back.task_id == "kv-0-1" and back.method == "score"


def test_component_kind_from_the_base_class() -> None:
    assert component_kind(KVStoreEnv) == "environment" and component_kind(RandomExplorer()) == "teacher"
    assert component_kind(object()) == "component"


def test_tasks_returning_dicts_is_named_as_such() -> None:
    env = broken_envs.DictTasks()
    with pytest.raises(ComponentError, match=r"failed in tasks\('train'\): item 0 of the list it returned is a dict, not a coevolve_sdk.Task; "
                                             r"build Task\(\.\.\.\) records"):
        checked_tasks(env, "train")
    assert len(checked_tasks(KVStoreEnv(), "test")) == 16


def test_validation_names_the_environment_whose_replay_raises() -> None:
    env = PayloadReader()
    base = env.tasks()[0].model_copy(update={"payload": {**env.tasks()[0].payload, "limit": 3}})
    cand = CandidateTask(query="set apples to 1 three times", reference_actions=[format_tool_call("set", {"key": "apples", "value": 1})] * 3,
                         payload={"initial": {}})
    # the task made for the candidate keeps the parent's payload, so it starts fine ...
    verdict, task = Validator().validate(PayloadReader(), cand, base, set())
    assert verdict.accepted, verdict.reason
    # ... and without the key, the rejection says which environment and method failed, and where
    verdict, task = Validator().validate(PayloadReader(), cand, env.tasks()[0], set())
    assert not verdict.accepted and verdict.reason == "replay raised KeyError: 'limit'"
    assert verdict.evidence["culprit"].startswith("environment 'payload-reader'") and "failed in replay()" in verdict.evidence["culprit"]
    assert any('task.payload["limit"]' in f for f in verdict.evidence["where"])


def test_exploration_names_the_environment_method_and_task() -> None:
    env = SamplerBug()
    task = env.tasks()[4]
    with pytest.raises(ComponentError) as info:
        RandomExplorer().explore(env, task, ExplorationContext(signal_kind="seed", summary="s"))
    assert info.value.headline.startswith(f"environment 'sampler-bug' ({__name__}.SamplerBug) failed in sample_action() on task 'kv-0-4': IndexError")
    assert "sorted(self.store)[99]" in str(info.value)


def test_a_run_on_an_environment_whose_tasks_are_dicts_says_so(tmp_path: Path) -> None:
    """The issue's case: this used to surface as 'grpo trains a transformers model: set
    context.policy ...' or an AttributeError in the tiny policy's tokenizer."""
    repo = Path(__file__).resolve().parents[2]
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"run_dir: {tmp_path / 'run'}\n"
        "environment: {name: dict-kv, options: {max_steps: 4, train_tasks: 8, test_tasks: 4}}\n"
        "policy: {name: tiny, options: {hidden_size: 32, layers: 1}}\n"
        "algorithm: {name: grpo, options: {warm_start: {steps: 1}}}\n"
        "training: {steps: 1, tasks_per_step: 2}\n"
        "pool: {seed_tasks: 4, seed_source: env}\n"
    )
    env = dict(os.environ, COEVOLVE_PLUGIN_MODULES="tests.toolenv.broken_envs", PYTHONPATH=str(repo))
    r = subprocess.run([sys.executable, "-m", "coevolve_sdk", "run", str(cfg), "--quiet"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-3000:]
    # the run reads the evaluation split first (its requests are kept out of the pool), so 'test' is named
    assert r.stderr.startswith("Error: environment 'dict-kv' (tests.toolenv.broken_envs.NamedDictTasks) failed in tasks('test'): "
                               "item 0 of the list it returned is a dict, not a coevolve_sdk.Task"), r.stderr[-3000:]
    assert "Traceback" not in r.stderr and "context.policy" not in r.stderr
