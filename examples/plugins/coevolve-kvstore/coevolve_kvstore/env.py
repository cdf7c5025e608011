"""A key-value store the agent manipulates through five tools, written on ToolEnv.

Small and deterministic on purpose: a tiny model can learn it on a CPU, every task is graded by
comparing the final store with the expected one, and a synthetic task is just "these calls on
that starting store", so the whole CoEvolve loop (signals, exploration, validation) has
something real to work on in seconds. ToolEnv supplies the parsing, argument validation,
schemas, error observations, random actions, request phrasing, grading by state comparison and
the instantiation of synthetic tasks; this module is the store, its tools and its task generator.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field

from coevolve_sdk import (
    EnvOptions,
    Task,
    ToolCall,
    ToolEnv,
    ToolError,
    format_tool_call,
    from_state,
    tool,
)

KEYS = ["apples", "pears", "plums", "figs", "limes", "kiwis", "dates", "grapes"]

AnyKey = Annotated[str, from_state(KEYS)]
StoredKey = Annotated[str, from_state(lambda env: sorted(env.store))]


class KVStoreEnv(ToolEnv):
    """Example environment: ``gymnasium.make("coevolve/kvstore-v0")``."""

    name = "kvstore"
    version = 0
    system_prompt = "You manage a key-value store of integers. Use the tools to do what the user asks. When you are done, reply with a short message and no tool call."
    answer_template = "The value is {answer}."

    class Options(EnvOptions):
        max_steps: int = Field(8, ge=1, description="Agent messages per episode.")
        train_tasks: int = Field(64, ge=1, description="Generated seed tasks in the train split.")
        test_tasks: int = Field(16, ge=1, description="Generated tasks in the test split.")
        min_ops: int = Field(1, ge=1, description="Fewest operations in a generated task.")
        max_ops: int = Field(3, ge=1, description="Most operations in a generated task.")
        task_seed: int = Field(0, description="Seed of the task generator (the splits are fixed by it).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store: dict[str, int] = {}
        self._splits: dict[str, list[Task]] | None = None

    # ------------------------------------------------------------ state
    def setup(self, task: Task) -> None:
        initial = task.payload.get("initial", {})
        if not isinstance(initial, dict):
            raise ValueError("kvstore task payload 'initial' must be a mapping of key to integer")
        self.store = {str(k): int(v) for k, v in initial.items()}

    def snapshot(self) -> dict[str, int]:
        return self.store

    def _need(self, key: str) -> None:
        if key not in self.store:
            raise ToolError(f"no key '{key}'")

    # ------------------------------------------------------------ tools
    @tool(phrase="set {key} to {value}")
    def set(self, key: Annotated[AnyKey, Field(max_length=40)], value: Annotated[int, from_state(range(10))]) -> str:
        """Store an integer under a key.

        Args:
            key: The key to write (at most 40 characters).
            value: The integer to store.
        """
        self.store[key] = value
        return "ok"

    @tool(phrase="tell me the value of {key}", answers=True)
    def get(self, key: StoredKey) -> int:
        """Read the integer stored under a key.

        Args:
            key: An existing key.
        """
        self._need(key)
        return self.store[key]

    @tool(phrase="remove {key}")
    def delete(self, key: StoredKey) -> str:
        """Remove a key.

        Args:
            key: An existing key.
        """
        self._need(key)
        del self.store[key]
        return "ok"

    @tool(phrase="add {amount} to {key}")
    def increment(self, key: StoredKey, amount: Annotated[int, from_state(range(1, 5))]) -> int:
        """Add an integer to the value under an existing key.

        Args:
            key: An existing key.
            amount: What to add (may be negative).
        """
        self._need(key)
        self.store[key] += amount
        return self.store[key]

    @tool(phrase="list the keys")
    def list_keys(self) -> list[str]:
        """List the stored keys."""
        return sorted(self.store)

    # ------------------------------------------------------------ tasks
    def tasks(self, split: str = "train") -> list[Task]:
        if self._splits is None:
            o = self.options
            rng = np.random.default_rng(o.task_seed)
            made = [self._generate(rng, i) for i in range(o.train_tasks + o.test_tasks)]
            self._splits = {"train": made[: o.train_tasks], "test": [t.model_copy(update={"split": "test"}) for t in made[o.train_tasks:]]}
        if split not in self._splits:
            raise ValueError(f"kvstore has splits 'train' and 'test', not '{split}'")
        return list(self._splits[split])

    def _generate(self, rng: np.random.Generator, i: int) -> Task:
        """A random sequence of 1-3 operations on a random starting store; build_task runs it
        and records the expected store and answer."""
        o = self.options
        initial = {KEYS[int(k)]: int(rng.integers(0, 10)) for k in rng.choice(len(KEYS), size=int(rng.integers(1, 4)), replace=False)}
        present = set(initial)
        calls: list[ToolCall] = []
        for _ in range(int(rng.integers(o.min_ops, o.max_ops + 1))):
            kind = ["set", "increment", "delete", "get"][int(rng.integers(0, 4))]
            keys = sorted(present)
            if kind != "set" and not keys:
                kind = "set"
            if kind == "set":
                call = ToolCall(name="set", arguments={"key": KEYS[int(rng.integers(0, len(KEYS)))], "value": int(rng.integers(0, 10))})
                present.add(call.arguments["key"])
            elif kind == "increment":
                call = ToolCall(name="increment", arguments={"key": keys[int(rng.integers(0, len(keys)))], "amount": int(rng.integers(1, 5))})
            else:
                call = ToolCall(name=kind, arguments={"key": keys[int(rng.integers(0, len(keys)))]})
                if kind == "delete":
                    present.discard(call.arguments["key"])
            calls.append(call)
        return self.build_task(self.request(calls), [format_tool_call(c.name, c.arguments) for c in calls],
                               initial=initial, id=f"kv-{o.task_seed}-{i}", origin="seed")
