"""The example environment through gymnasium, and the AgentEnv guarantees."""

from __future__ import annotations

import gymnasium
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings, strategies as st

import coevolve_sdk  # noqa: F401  (registers environments with gymnasium)
from coevolve_kvstore import KVStoreEnv
from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.records import CandidateTask


def test_gymnasium_make_and_check_env() -> None:
    env = gymnasium.make("coevolve/kvstore-v0", max_steps=5)
    assert isinstance(env.unwrapped, KVStoreEnv)
    check_env(env.unwrapped, skip_render_check=False)
    obs, info = env.reset(seed=0)
    assert "tools" in info and {t["function"]["name"] for t in info["tools"]} >= {"set", "get"}


def test_every_seed_task_replays_to_success_and_a_wrong_one_fails() -> None:
    env = KVStoreEnv()
    for task in env.tasks("train") + env.tasks("test"):
        assert env.replay(task, task.reference_actions).score == 1.0
        assert env.replay(task, task.reference_actions[:-1] + ["<tool_call>{\"name\": \"set\", \"arguments\": {\"key\": \"zz\", \"value\": 1}}</tool_call>", "Done."]).score == 0.0


def test_splits_are_disjoint_and_deterministic() -> None:
    a, b = KVStoreEnv(), KVStoreEnv()
    assert [t.model_dump() for t in a.tasks("train")] == [t.model_dump() for t in b.tasks("train")]
    assert not {t.id for t in a.tasks("train")} & {t.id for t in a.tasks("test")}


def test_truncation_and_reward_only_at_the_end() -> None:
    env = KVStoreEnv(max_steps=3)
    task = env.tasks()[0]
    env.reset(options={"task": task})
    call = format_tool_call("list_keys", {})
    r1 = env.step(call)
    r2 = env.step(call)
    r3 = env.step(call)
    assert (r1[1], r1[2], r1[3]) == (0.0, False, False)
    assert (r2[2], r2[3]) == (False, False)
    assert r3[3] is True and r3[2] is False
    assert env.step(call)[4]["error"] == "episode over"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_step_never_raises_on_garbage(action: str) -> None:
    env = KVStoreEnv()
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and 0.0 <= reward <= 1.0


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2)), max_size=3),
       st.sampled_from(["set", "get", "delete", "increment", "list_keys", "rm", ""]))
def test_wrong_arguments_become_error_observations(args: dict, name: str) -> None:
    env = KVStoreEnv()
    env.reset(seed=2)
    obs, _, _, _, info = env.step(format_tool_call(name, args))
    assert isinstance(obs, str)
    if info.get("error"):
        assert obs.startswith("Error")


def test_make_task_rejects_impossible_actions() -> None:
    env = KVStoreEnv()
    base = env.tasks()[0]
    bad = CandidateTask(query="delete a key that is not there", reference_actions=[format_tool_call("delete", {"key": "nope-nope"})] * 3)
    import pytest

    with pytest.raises(ValueError, match="fails on the base state"):
        env.make_task(bad, base)


def test_tasks_must_be_task_records() -> None:
    """A subclass's tasks() is checked where it returns, so dicts never travel further."""
    import pytest

    from coevolve_sdk.components.blame import ComponentError

    class Dicts(KVStoreEnv):
        name = ""

        def tasks(self, split: str = "train") -> list:
            return [t.model_dump() for t in super().tasks(split)]

    with pytest.raises(ComponentError, match=r"environment 'Dicts' .* failed in tasks\('test'\): item 0 of the list it returned is a dict"):
        Dicts().tasks("test")
    assert len(KVStoreEnv().tasks("test")) == 16  # the base class's own call is checked too, and passes
