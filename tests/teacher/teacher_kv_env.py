"""A small, deterministic key-value environment for the teacher tests.

Real in the ways that matter to the teacher: actions are ``<tool_call>`` blocks parsed by the
core's parser, unknown tools and missing keys are errors the environment reports, a message
without a tool call ends the episode, and grading compares the final store with a goal state.
Synthetic tasks get their goal by executing the reference actions on the parent's initial
state, so a task whose actions fail or do nothing cannot pass validation by accident.
"""

from __future__ import annotations

import json
from typing import Any

from coevolve_sdk.env.actions import ActionParseError, format_tool_call, parse_tool_calls
from coevolve_sdk.env.base import AgentEnv, Outcome
from coevolve_sdk.records import CandidateTask, Step, Task, ToolSpec

_S = {"type": "string"}


class KVEnv(AgentEnv):
    name = "teacher-kv"
    version = 0

    TOOLS = [
        ToolSpec(name="set", description="Store a value under a key.", parameters={"type": "object", "properties": {"key": _S, "value": _S}, "required": ["key", "value"]}),
        ToolSpec(name="get", description="Read the value stored under a key.", parameters={"type": "object", "properties": {"key": _S}, "required": ["key"]}),
        ToolSpec(name="delete", description="Remove a key.", parameters={"type": "object", "properties": {"key": _S}, "required": ["key"]}),
        ToolSpec(name="list_keys", description="List the keys in the store."),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store: dict[str, str] = {}

    # ---------------------------------------------------------------- tasks
    def tasks(self, split: str = "train") -> list[Task]:
        return [
            Task(
                id="kv-seed-1",
                env=self.name,
                query="Change the colour to blue and record that the owner is ann.",
                payload={"initial": {"colour": "red", "size": "small"}, "goal": {"colour": "blue", "size": "small", "owner": "ann"}},
                reference_actions=[format_tool_call("set", {"key": "colour", "value": "blue"}), format_tool_call("set", {"key": "owner", "value": "ann"}), "Done."],
            )
        ]

    def tools(self) -> list[ToolSpec]:
        return list(self.TOOLS)

    # ---------------------------------------------------------------- episode
    def begin(self, task: Task) -> list[dict[str, Any]]:
        self.store = dict(task.payload.get("initial", {}))
        return [
            {"role": "system", "content": "You manage a key-value store through tools. Reply without a tool call when you are done."},
            {"role": "user", "content": task.query},
        ]

    @staticmethod
    def _apply(store: dict[str, str], name: str, args: dict[str, Any]) -> str:
        """Run one call on ``store``; returns the observation or raises ValueError."""
        if name == "set":
            if not isinstance(args.get("key"), str) or not isinstance(args.get("value"), str):
                raise ValueError("set needs string 'key' and 'value'")
            store[args["key"]] = args["value"]
            return f"ok: {args['key']} = {args['value']}"
        if name == "get":
            key = args.get("key")
            if key not in store:
                raise ValueError(f"no key {key!r}")
            return json.dumps({key: store[key]})
        if name == "delete":
            key = args.get("key")
            if key not in store:
                raise ValueError(f"no key {key!r}")
            del store[key]
            return f"deleted {key}"
        if name == "list_keys":
            return json.dumps(sorted(store))
        raise ValueError(f"unknown tool {name!r}")

    def act(self, action: str) -> Outcome:
        try:
            calls = parse_tool_calls(action)
        except ActionParseError as e:
            return Outcome(messages=[{"role": "user", "content": f"Error: {e}"}], error=str(e))
        if not calls:
            return Outcome(messages=[{"role": "user", "content": "Episode finished."}], done=True)
        outs: list[str] = []
        for c in calls:
            try:
                outs.append(self._apply(self.store, c.name, c.arguments))
            except ValueError as e:
                msg = f"Error: {e}"
                return Outcome(messages=[{"role": "tool", "content": "\n".join(outs + [msg])}], error=str(e), tool_names=[c.name for c in calls])
        return Outcome(messages=[{"role": "tool", "content": "\n".join(outs)}], tool_names=[c.name for c in calls])

    def score(self) -> float:
        goal = (self.task.payload if self.task else {}).get("goal")
        if goal is None:
            return 0.0
        return 1.0 if self.store == goal else 0.0

    def sample_action(self) -> str:
        rng = self.np_random
        keys = sorted(self.store) or ["colour"]
        r = int(rng.integers(0, 4))
        if r == 0:
            return format_tool_call("set", {"key": keys[int(rng.integers(0, len(keys)))], "value": f"v{int(rng.integers(0, 9))}"})
        if r == 1:
            return format_tool_call("get", {"key": keys[int(rng.integers(0, len(keys)))]})
        if r == 2:
            return format_tool_call("set", {"key": f"k{int(rng.integers(0, 9))}", "value": "x"})
        return format_tool_call("list_keys", {})

    # ---------------------------------------------------------------- synthesis
    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        initial = dict((base.payload if base else {}).get("initial", {}))
        goal = dict(initial)
        for a in candidate.reference_actions:
            try:
                for c in parse_tool_calls(a):
                    self._apply(goal, c.name, c.arguments)
            except (ActionParseError, ValueError):
                continue  # the replay will report the failing action; the goal ignores it
        if goal == initial:
            raise ValueError("the reference actions leave the store unchanged, so the task has no checkable outcome")
        return Task(
            env=self.name,
            query=candidate.query,
            origin="synthetic",
            payload={"initial": initial, "goal": goal, "description": candidate.description},
            reference_actions=list(candidate.reference_actions),
        )

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        return "In the store: " + "; ".join(s.action for s in steps)
