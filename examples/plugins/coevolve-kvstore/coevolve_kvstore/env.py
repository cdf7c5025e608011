"""A key-value store the agent manipulates through five tools.

Small and deterministic on purpose: a tiny model can learn it on a CPU, every task is graded by
comparing the final store with the expected one, and a synthetic task is just "these calls on
that starting store", so the whole CoEvolve loop (signals, exploration, validation) has
something real to work on in seconds.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pydantic import Field

from coevolve_sdk.actions import ActionParseError, ToolCall, format_tool_call, parse_tool_calls
from coevolve_sdk.environment import AgentEnv, EnvOptions, Outcome
from coevolve_sdk.types import CandidateTask, Step, Task, ToolSpec

KEYS = ["apples", "pears", "plums", "figs", "limes", "kiwis", "dates", "grapes"]

TOOLS = [
    ToolSpec(name="set", description="Store an integer under a key.",
             parameters={"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}, "required": ["key", "value"]}),
    ToolSpec(name="get", description="Read the integer stored under a key.",
             parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
    ToolSpec(name="delete", description="Remove a key.",
             parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
    ToolSpec(name="increment", description="Add an integer to the value under an existing key.",
             parameters={"type": "object", "properties": {"key": {"type": "string"}, "amount": {"type": "integer"}}, "required": ["key", "amount"]}),
    ToolSpec(name="list_keys", description="List the stored keys.", parameters={"type": "object", "properties": {}}),
]
_TOOL_ARGS = {t.name: t.parameters for t in TOOLS}

SYSTEM = "You manage a key-value store of integers. Use the tools to do what the user asks. When you are done, reply with a short message and no tool call."


class KVError(Exception):
    pass


def _check_args(call: ToolCall) -> dict[str, Any]:
    schema = _TOOL_ARGS.get(call.name)
    if schema is None:
        raise KVError(f"unknown tool '{call.name}'; available: {', '.join(_TOOL_ARGS)}")
    props = schema.get("properties", {})
    for extra in set(call.arguments) - set(props):
        raise KVError(f"'{call.name}' has no argument '{extra}'")
    for req in schema.get("required", []):
        if req not in call.arguments:
            raise KVError(f"'{call.name}' needs argument '{req}'")
    for k, v in call.arguments.items():
        want = props[k]["type"]
        ok = isinstance(v, str) if want == "string" else (isinstance(v, int) and not isinstance(v, bool))
        if not ok:
            raise KVError(f"argument '{k}' of '{call.name}' must be a {want}, got {json.dumps(v)[:40]}")
    return call.arguments


def execute(store: dict[str, int], call: ToolCall) -> str:
    """Apply one call to ``store`` in place and return the tool's answer; raises KVError."""
    args = _check_args(call)
    if call.name == "set":
        if len(args["key"]) > 40:
            raise KVError("keys are at most 40 characters")
        store[args["key"]] = args["value"]
        return "ok"
    if call.name == "get":
        if args["key"] not in store:
            raise KVError(f"no key '{args['key']}'")
        return str(store[args["key"]])
    if call.name == "delete":
        if args["key"] not in store:
            raise KVError(f"no key '{args['key']}'")
        del store[args["key"]]
        return "ok"
    if call.name == "increment":
        if args["key"] not in store:
            raise KVError(f"no key '{args['key']}'")
        store[args["key"]] += args["amount"]
        return str(store[args["key"]])
    return json.dumps(sorted(store))


def _phrase(call: ToolCall) -> str:
    a = call.arguments
    return {
        "set": lambda: f"set {a.get('key')} to {a.get('value')}",
        "get": lambda: f"tell me the value of {a.get('key')}",
        "delete": lambda: f"remove {a.get('key')}",
        "increment": lambda: f"add {a.get('amount')} to {a.get('key')}",
        "list_keys": lambda: "list the keys",
    }.get(call.name, lambda: call.name)()


class KVStoreEnv(AgentEnv):
    """Example environment: ``gymnasium.make("coevolve/kvstore-v0")``."""

    name = "kvstore"
    version = 0

    class Options(EnvOptions):
        max_steps: int = Field(8, ge=1, description="Agent messages per episode.")
        train_tasks: int = Field(64, ge=1, description="Generated seed tasks in the train split.")
        test_tasks: int = Field(16, ge=1, description="Generated tasks in the test split.")
        min_ops: int = Field(1, ge=1, description="Fewest operations in a generated task.")
        max_ops: int = Field(3, ge=1, description="Most operations in a generated task.")
        task_seed: int = Field(0, description="Seed of the task generator (the splits are fixed by it).")

    def __init__(self, options: Any = None, render_mode: str | None = None, **kwargs: Any) -> None:
        super().__init__(options, render_mode, **kwargs)
        self.store: dict[str, int] = {}
        self.answer: str | None = None
        self._splits: dict[str, list[Task]] | None = None

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
        o = self.options
        initial = {KEYS[int(k)]: int(rng.integers(0, 10)) for k in rng.choice(len(KEYS), size=int(rng.integers(1, 4)), replace=False)}
        store = dict(initial)
        calls: list[ToolCall] = []
        for _ in range(int(rng.integers(o.min_ops, o.max_ops + 1))):
            kind = ["set", "increment", "delete", "get"][int(rng.integers(0, 4))]
            present = sorted(store)
            if kind != "set" and not present:
                kind = "set"
            if kind == "set":
                call = ToolCall(name="set", arguments={"key": KEYS[int(rng.integers(0, len(KEYS)))], "value": int(rng.integers(0, 10))})
            elif kind == "increment":
                call = ToolCall(name="increment", arguments={"key": present[int(rng.integers(0, len(present)))], "amount": int(rng.integers(1, 5))})
            else:
                call = ToolCall(name=kind, arguments={"key": present[int(rng.integers(0, len(present)))]})
            execute(store, call)
            calls.append(call)
        actions = [format_tool_call(c.name, c.arguments) for c in calls]
        answer = execute(dict(store), calls[-1]) if calls[-1].name == "get" else None
        actions.append(f"The value is {answer}." if answer is not None else "Done.")
        query = self._query(calls)
        return Task(
            id=f"kv-{o.task_seed}-{i}",
            env=self.name,
            query=query,
            origin="seed",
            payload={"initial": initial, "expected": store, "answer": answer},
            reference_actions=actions,
        )

    @staticmethod
    def _query(calls: list[ToolCall]) -> str:
        text = ", then ".join(_phrase(c) for c in calls)
        return text[0].upper() + text[1:] + "."

    # ------------------------------------------------------------ episode
    def tools(self) -> list[ToolSpec]:
        return list(TOOLS)

    def begin(self, task: Task) -> list[dict[str, Any]]:
        initial = task.payload.get("initial", {})
        if not isinstance(initial, dict):
            raise ValueError("kvstore task payload 'initial' must be a mapping of key to integer")
        self.store = {str(k): int(v) for k, v in initial.items()}
        self.answer = None
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.query}]

    def act(self, action: str) -> Outcome:
        try:
            calls = parse_tool_calls(action)
        except ActionParseError as e:
            return Outcome(messages=[{"role": "tool", "content": f"Error: {e}"}], error=str(e))
        if not calls:
            self.answer = action
            return Outcome(messages=[], done=True)
        msgs, names, err = [], [], None
        for call in calls:
            names.append(call.name)
            try:
                result = execute(self.store, call)
            except KVError as e:
                err = str(e)
                result = f"Error: {e}"
            msgs.append({"role": "tool", "content": result, "name": call.name})
        return Outcome(messages=msgs, tool_names=names, error=err)

    def score(self) -> float:
        if self.task is None:
            return 0.0
        p = self.task.payload
        if self.store != p.get("expected", {}):
            return 0.0
        want = p.get("answer")
        if want is not None and (self.answer is None or str(want) not in self.answer):
            return 0.0
        return 1.0

    # ------------------------------------------------------------ exploration support
    def sample_action(self) -> str:
        rng = self.np_random
        present = sorted(self.store)
        name = ["set", "get", "delete", "increment", "list_keys"][int(rng.integers(0, 5))]
        if name in ("get", "delete", "increment") and not present:
            name = "set"
        if name == "set":
            args: dict[str, Any] = {"key": KEYS[int(rng.integers(0, len(KEYS)))], "value": int(rng.integers(0, 10))}
        elif name == "increment":
            args = {"key": present[int(rng.integers(0, len(present)))], "amount": int(rng.integers(1, 5))}
        elif name == "list_keys":
            args = {}
        else:
            args = {"key": present[int(rng.integers(0, len(present)))]}
        return format_tool_call(name, args)

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        calls: list[ToolCall] = []
        for s in steps:
            try:
                calls.extend(parse_tool_calls(s.action))
            except ActionParseError:
                continue
        return self._query(calls) if calls else "Do nothing."

    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        initial = dict((base.payload.get("initial", {}) if base else {}) or {})
        initial.update(candidate.payload.get("initial", {}))
        store = dict(initial)
        answer = None
        for a in candidate.reference_actions:
            try:
                calls = parse_tool_calls(a)
            except ActionParseError as e:
                raise ValueError(f"reference action is malformed: {e}") from None
            for c in calls:
                try:
                    out = execute(store, c)
                except KVError as e:
                    raise ValueError(f"reference action fails on the base state: {e}") from None
                answer = out if c.name == "get" else None
        return Task(
            env=self.name,
            query=candidate.query,
            origin="synthetic",
            payload={"initial": initial, "expected": store, "answer": answer},
            reference_actions=list(candidate.reference_actions) + ([f"The value is {answer}."] if answer is not None else []),
        )
