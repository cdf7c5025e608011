"""Environments that each break one contract, for the contract checker's tests (and a plugin
module registering one of them, for ``coevolve check env``)."""

from __future__ import annotations

from typing import Any

from coevolve_kvstore import KVStoreEnv

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.env.base import Outcome
from coevolve_sdk.components.hooks import hookimpl
from coevolve_sdk.records import Task


class FailingReference(KVStoreEnv):
    """The third train task's reference reads a key that its starting store does not have."""

    name = ""

    def tasks(self, split: str = "train") -> list[Task]:
        ts = super().tasks(split)
        if split == "train":
            t = ts[2]
            ts[2] = t.model_copy(update={"reference_actions": [format_tool_call("get", {"key": "no-such-key"})] + t.reference_actions})
        return ts


class WrongBegin(KVStoreEnv):
    """begin() returns the query as a string instead of a list of messages."""

    name = ""

    def begin(self, task: Task) -> Any:
        super().begin(task)
        return task.query


class DictTasks(KVStoreEnv):
    """tasks() returns plain dicts."""

    name = ""

    def tasks(self, split: str = "train") -> list[Any]:
        return [t.model_dump() for t in super().tasks(split)]


class NamedDictTasks(DictTasks):
    name = "dict-kv"


class BadSampler(KVStoreEnv):
    """sample_action() reads keys that do not exist."""

    name = ""

    def sample_action(self) -> str:
        return format_tool_call("get", {"key": f"missing-{int(self.np_random.integers(0, 100))}"})


class RaisingAct(KVStoreEnv):
    """act() indexes into the parsed JSON without checking it: bad input raises."""

    name = "broken-kv"

    def act(self, action: str) -> Outcome:
        if "<tool_call>" in action and "}" not in action:
            raise IndexError("list index out of range")
        return super().act(action)


class RaisingStep(KVStoreEnv):
    """Overrides step() itself and raises on an empty action."""

    name = ""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not action.strip():
            raise ValueError("empty action")
        return super().step(action)


@hookimpl
def register_environments() -> list[type]:
    return [RaisingAct, NamedDictTasks]
