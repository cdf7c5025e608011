"""The errors a plugin author meets name what is wrong, where, and fit the mistake (issue 22)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated

import pytest
import yaml

from coevolve_sdk.env.contract import GraderError, ToolReturnTypeError
from coevolve_sdk.components.registry import Registry
from coevolve_sdk.authoring.check import check_env
from coevolve_sdk.env.toolenv import ToolEnv, call, from_state, tool
from tests.conftest import coevolve_cmd
from tests.toolenv import user_error_envs as u

ENVS_FILE = Path(u.__file__)
GRADER_LINE = next(i for i, line in enumerate(ENVS_FILE.read_text().splitlines(), 1) if "GRADER-BUG-LINE" in line)


# ---------------------------------------------------------------- (a) declared return types
def test_a_tool_returning_another_type_than_declared_fails_check_env_naming_tool_and_types() -> None:
    report = check_env(u.WrongReturn, raise_on_failure=False)
    text = str(report)
    assert not report.ok
    assert "tool 'add' is declared to return int but returned str ('now 1')" in text
    assert f"{ENVS_FILE}:" in text  # the tool's own lines


def test_a_tool_returning_another_type_stops_step_at_run_time() -> None:
    env = u.WrongReturn()
    task = u.Adder().tasks("train")[0]
    env.reset(seed=0, options={"task": task})
    with pytest.raises(ToolReturnTypeError, match=r"tool 'add' is declared to return int but returned str \('now 1'\)"):
        env.step(call("add", k=1))


class Returns(ToolEnv):
    """Tools whose results match their declarations (and one without a declaration)."""

    name = ""

    def setup(self, task):  # type: ignore[no-untyped-def]
        self.n = 0

    def snapshot(self) -> dict[str, int]:
        return {"n": self.n}

    @tool
    def names(self) -> list[str]:
        """Names."""
        return ["a", "b"]

    @tool
    def ratio(self) -> float:
        """An int is a fine float."""
        return 1

    @tool
    def maybe(self, k: Annotated[int, from_state([0, 1])]) -> str | None:
        """Text or nothing.

        Args:
            k: Which.
        """
        return "x" if k else None

    @tool
    def anything(self):  # type: ignore[no-untyped-def]
        """No declaration: not checked."""
        return {"a": (1, 2)}

    @tool
    def nested(self) -> dict[str, list[int]]:
        """A str in a list of ints."""
        return {"a": [1, "2"]}

    def tasks(self, split="train"):  # type: ignore[no-untyped-def]
        return []


@pytest.mark.parametrize("action", [call("names"), call("ratio"), call("maybe", k=0), call("maybe", k=1), call("anything")])
def test_results_of_the_declared_type_pass(action: str) -> None:
    env = Returns()
    env.reset(seed=0, options={"task": {"env": "x", "query": "q"}})
    _, _, _, _, info = env.step(action)
    assert "error" not in info


def test_a_wrong_element_type_is_caught_too() -> None:
    env = Returns()
    env.reset(seed=0, options={"task": {"env": "x", "query": "q"}})
    with pytest.raises(ToolReturnTypeError, match=r"declared to return dict\[str, list\[int\]\] but returned dict\[str, list\]"):
        env.step(call("nested"))


# ---------------------------------------------------------------- (b, c) a grader that raises
def test_a_raising_grader_is_named_in_check_env_with_task_and_line_and_no_act_blame() -> None:
    report = check_env(u.BadGrader, raise_on_failure=False)
    failed = report.failed
    assert failed, str(report)
    for r in failed:
        assert r.message.startswith("the grader of environment 'adder-bad-grader'"), str(report)
        assert "rubric check 'ratio' raised KeyError: 'total'" in r.message and "on task '" in r.message
        assert any(f"{ENVS_FILE}:{GRADER_LINE} in ratio" in d for d in r.details), r.details
        assert "act()" not in r.fix and "grader" in r.fix


def test_step_raises_a_grader_error_and_never_a_bare_exception() -> None:
    env = u.BadGrader()
    task = env.tasks("train")[0]
    env.reset(seed=0, options={"task": task})
    with pytest.raises(GraderError) as info:
        env.step("I give up.")  # the final message, on a wrong state: the grader raises
    e = info.value
    assert e.task_id == task.id and e.check == "ratio" and isinstance(e.__cause__, KeyError)
    assert any(f'"{ENVS_FILE}", line {GRADER_LINE}' in f for f in e.frames)
    # bad agent output still never raises
    env.reset(seed=0, options={"task": task})
    obs, reward, done, _, info2 = env.step("<tool_call>{</tool_call>")
    assert obs.startswith("Error:") and not done and info2["error"]


def _run(tmp_path: Path, sub_env: dict[str, str], env_name: str) -> subprocess.CompletedProcess[str]:
    cfg = {
        "run_dir": str(tmp_path / "run"), "seed": 3, "plugins": ["tests.core.toy_plugin", "tests.toolenv.user_error_envs"],
        "environment": {"name": env_name, "options": {"max_steps": 3}},
        "policy": {"name": "toy-menu"}, "algorithm": {"name": "toy-reinforce"}, "teacher": {"name": "random-explorer"},
        "rollout": {"group_size": 2}, "training": {"steps": 1, "tasks_per_step": 2},
        "pool": {"seed_tasks": 6, "seed_source": "env"}, "eval": {"max_tasks": 2},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run([*coevolve_cmd(), "run", str(path)], capture_output=True, text=True, env=sub_env, timeout=300)


def test_coevolve_run_names_the_grader_task_and_line(tmp_path: Path, sub_env: dict[str, str]) -> None:
    out = _run(tmp_path, sub_env, "adder-bad-grader")
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr
    assert "the grader of environment 'adder-bad-grader'" in err and "rubric check 'ratio' raised KeyError: 'total'" in err
    assert "on task 'test-" in err or "on task 'train-" in err
    assert f'"{ENVS_FILE}", line {GRADER_LINE}, in ratio' in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- (d) hints that fit the error
def test_a_tool_without_a_type_hint_is_named_without_a_path_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "hintless_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        from coevolve_sdk.env.toolenv import ToolEnv, tool


        class Hintless(ToolEnv):
            name = "hintless"

            @tool
            def add(self, k) -> int:
                return 1
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry()
    reg.add_module("hintless_plugin")
    msg = reg.failures[-1].message()
    assert "tool Hintless.add: argument 'k' has no type hint" in msg
    assert "importable" not in msg and "module path" not in msg
    assert f"{pkg / '__init__.py'}:" in msg
    sys.modules.pop("hintless_plugin", None)

    reg.add_module("no_such_module_here")
    assert "cannot find 'no_such_module_here'" in reg.failures[-1].message() and "PYTHONPATH" in reg.failures[-1].message()


# ---------------------------------------------------------------- no silent drops, no leaks
def test_duplicate_seed_tasks_are_reported_with_count_and_ids(tmp_path: Path, sub_env: dict[str, str]) -> None:
    out = _run(tmp_path, sub_env, "adder-duplicate-seeds")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING: 2 of 6 seed tasks left out of the pool as duplicates of earlier ones" in out.stdout
    assert "train-4, train-5" in out.stdout


def test_check_env_refuses_a_test_split_that_repeats_train_tasks() -> None:
    report = check_env(u.LeakyTest, raise_on_failure=False)
    r = report.result("tasks")
    assert r.status == "failed"
    assert r.message == "tasks('test') has 6 tasks with the request and payload of a train task: t0, t1, t2, t3, t4"
    assert "must not share tasks with train" in r.fix


# ---------------------------------------------------------------- tool_docs on every ToolEnv
def test_every_toolenv_has_tool_docs_even_with_its_own_options() -> None:
    from coevolve_kvstore import KVStoreEnv

    assert "tool_docs" in KVStoreEnv.Options.model_fields  # KVStoreEnv.Options derives from EnvOptions only
    assert KVStoreEnv.Options.__qualname__ == "KVStoreEnv.Options" and KVStoreEnv().options.max_steps == 8
    full, compact, none = (KVStoreEnv(tool_docs=d).tools() for d in ("full", "compact", "none"))
    assert [t.name for t in compact] == [t.name for t in full] and none == []
    for f, c in zip(full, compact):
        assert c.description == f.description
        assert c.parameters == {"properties": {k: {"type": v["type"]} for k, v in f.parameters["properties"].items()}}
    assert len(str(compact)) < len(str(full))
    # validation does not depend on what the prompt shows
    env = KVStoreEnv(tool_docs="none")
    task = env.tasks("train")[0]
    assert env.replay(task, task.reference_actions).success


# ---------------------------------------------------------------- a plugin under development
def test_plugin_modules_serve_check_env_and_gymnasium_make_without_installing(sub_env: dict[str, str]) -> None:
    """The tutorial's "Developing without installing": COEVOLVE_PLUGIN_MODULES + PYTHONPATH."""
    env = dict(sub_env, COEVOLVE_PLUGIN_MODULES="tests.toolenv.user_error_envs")
    checked = subprocess.run([*coevolve_cmd(), "check", "env", "adder-duplicate-seeds"], capture_output=True, text=True, env=env,
                             timeout=300)
    assert checked.returncode == 0 and "All contracts hold." in checked.stdout, checked.stdout + checked.stderr
    code = "import gymnasium, coevolve_sdk; print(type(gymnasium.make('coevolve/adder-bad-grader-v0').unwrapped).__name__)"
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert made.returncode == 0 and made.stdout.strip() == "BadGrader", made.stderr
