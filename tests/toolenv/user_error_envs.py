"""Environments with the mistakes a new plugin author makes (a grader that raises on an agent's
wrong episode, a tool returning another type than it declares), as a plugin module for
``coevolve run`` and ``coevolve check env`` in tests/toolenv/test_user_errors.py."""

from __future__ import annotations

from typing import Annotated, Any

from coevolve_sdk.components.hooks import hookimpl
from coevolve_sdk.env.rubric import Check, Rubric, state_matches
from coevolve_sdk.env.toolenv import ToolEnv, call, from_state, tool
from coevolve_sdk.records import Task


def ratio(env: Any) -> float:
    """Right state: 1. Otherwise divides by a payload key that no task has: raises."""
    if env.snapshot() == env.task.payload["expected"]:
        return 1.0
    return env.snapshot()["n"] / env.task.payload["total"]  # GRADER-BUG-LINE


class Adder(ToolEnv):
    """A counter with one tool; every task adds 1 or 2 a few times."""

    name = "adder-ok"

    def setup(self, task: Task) -> None:
        self.n = int(task.payload["initial"])

    def snapshot(self) -> dict[str, int]:
        return {"n": self.n}

    @tool(phrase="add {k}")
    def add(self, k: Annotated[int, from_state([1, 2])]) -> int:
        """Add to the counter and return its value.

        Args:
            k: How much to add.
        """
        self.n += k
        return self.n

    def tasks(self, split: str = "train") -> list[Task]:
        off = 0 if split == "train" else 100
        return [self.build_task(None, [call("add", k=i % 2 + 1)] * (i % 3 + 1), initial=i + off, id=f"{split}-{i}", split=split)
                for i in range(6)]


class BadGrader(Adder):
    name = "adder-bad-grader"
    rubric = Rubric([Check(state_matches, required=True), Check(ratio)])


class WrongReturn(Adder):
    name = "adder-wrong-return"

    @tool(phrase="add {k}")
    def add(self, k: Annotated[int, from_state([1, 2])]) -> int:
        """Add to the counter and say so.

        Args:
            k: How much to add.
        """
        self.n += k
        return f"now {self.n}"


class DuplicateSeeds(Adder):
    """Train tasks 4 and 5 repeat tasks 0 and 1 under other ids."""

    name = "adder-duplicate-seeds"

    def tasks(self, split: str = "train") -> list[Task]:
        ts = super().tasks(split)
        if split == "train":
            ts[4] = ts[0].model_copy(update={"id": "train-4"})
            ts[5] = ts[1].model_copy(update={"id": "train-5"})
        return ts


class LeakyTest(Adder):
    """The test split is the train split under other ids."""

    name = "adder-leaky-test"

    def tasks(self, split: str = "train") -> list[Task]:
        ts = super().tasks("train")
        return ts if split == "train" else [t.model_copy(update={"id": f"t{i}", "split": "test"}) for i, t in enumerate(ts)]


@hookimpl
def register_environments() -> list[type]:
    return [BadGrader, WrongReturn, DuplicateSeeds]
