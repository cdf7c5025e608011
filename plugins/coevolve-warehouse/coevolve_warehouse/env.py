"""The warehouse as a CoEvolve environment, on ToolEnv: four typed tools over a stock of bins.

The rules live in :mod:`coevolve_warehouse.world`; this module only wires them to the SDK:
tools, tasks of each split, grading with partial credit, random valid calls for exploration,
and the templater that phrases explored calls in the request language.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import Field

from coevolve_sdk import (
    CandidateTask,
    Check,
    EnvOptions,
    Rubric,
    Step,
    Task,
    ToolEnv,
    ToolError,
    calls_in,
    format_tool_call,
    from_state,
    tool,
)

from . import world
from .world import BINS, ITEMS, MAX_AMOUNT, Call, WarehouseError

Item = Annotated[str, from_state(ITEMS)]
Bin = Annotated[str, from_state(BINS)]
Amount = Annotated[int, Field(ge=1, le=MAX_AMOUNT)]


def _goals(env: "WarehouseEnv") -> float:
    """Partial credit: the share of the task's goals met (see ``world.grade``)."""
    if env.task is None:
        return 0.0
    p = env.task.payload
    answer = p.get("answer")
    score, _ = world.grade(p.get("initial") or {}, p.get("expected") or {}, env.stock,
                           int(answer) if answer is not None else None, env.answer)
    return score


def _action(call: Call) -> str:
    return format_tool_call(call.name, call.args)


#: Splits already drawn in this process, by (split, seed_state_share): a run makes many
#: environments (rollout pool, evolution workers, validation, evaluation) and the splits are
#: fixed, so each is drawn once. Lists are copied on the way out; the tasks are never changed.
_SPLITS_MADE: dict[tuple[str, float | None], list[Task]] = {}


class WarehouseEnv(ToolEnv):
    """Bins of parts: ``gymnasium.make("coevolve/warehouse-v0")``. Splits: ``train`` (the seed
    pool D_0), ``dev`` (for development) and ``test`` (held out), each from its own seed."""

    name = "warehouse"
    version = 0
    system_prompt = "You run a warehouse of bins. Use the tools, one call per message. When done, reply without a tool call."
    answer_template = "There are {answer}."
    rubric = Rubric([Check(_goals, name="goals")])
    #: a task counts as solved only when every goal is met; the score gives partial credit
    success_threshold = 1.0

    class Options(EnvOptions):
        max_steps: int = Field(6, ge=1, description="Agent messages per episode.")
        train_tasks: int | None = Field(None, ge=1, description="Use only the first N tasks of the train split (default: all 512).")
        seed_state_share: float = Field(
            0.1, ge=0, le=1, description="How often a skill of a train-split task (the seed pool D_0) is a state skill "
            "(clear, move_all, report); every dev and test task needs one. The lower, the less the seed pool teaches what "
            "the held-out splits ask. Changes the train split only (dev and test are fixed).",
        )
        tool_docs: Literal["full", "compact", "none"] = Field(  # ToolEnv's option (it applies it), compact here
            "compact", description="full: ToolEnv's whole JSON schema in the prompt; compact: only the arguments' names and "
                                   "types; none: no tool list in the prompt at all (a model trained from scratch learns the "
                                   "tools from its training tasks and cannot read docs: they would only cost compute)."
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stock: world.Stock = {}
        self._splits: dict[str, list[Task]] = {}

    # ------------------------------------------------------------ state
    def setup(self, task: Task) -> None:
        self.stock = copy.deepcopy(task.payload.get("initial") or {})

    def snapshot(self) -> Any:
        return self.stock

    # ------------------------------------------------------------ tools (arguments in the order requests name them)
    @tool(answers=True)
    def count(self, item: Item, bin: Bin) -> int:
        """How many of an item a bin holds."""
        return self._run(Call("count", {"item": item, "bin": bin}))

    @tool(name="add")
    def put(self, n: Amount, item: Item, bin: Bin) -> None:
        """Put items in a bin."""
        self._run(Call("add", {"n": n, "item": item, "bin": bin}))

    @tool(name="remove")
    def take(self, n: Amount, item: Item, bin: Bin) -> None:
        """Take items out of a bin."""
        self._run(Call("remove", {"n": n, "item": item, "bin": bin}))

    @tool(name="move")
    def shift(self, n: Amount, item: Item, src: Bin, dst: Bin) -> None:
        """Move items from one bin to another."""
        self._run(Call("move", {"n": n, "item": item, "src": src, "dst": dst}))

    def _run(self, call: Call) -> Any:
        try:
            out = world.apply(self.stock, call)
        except WarehouseError as e:
            raise ToolError(str(e)) from None
        return int(out) if call.name == "count" else None

    # ------------------------------------------------------------ tasks
    def tasks(self, split: str = "train") -> list[Task]:
        out = self._all(split)
        if split == "train" and self.options.train_tasks:
            out = out[: self.options.train_tasks]
        return out

    def _all(self, split: str) -> list[Task]:
        """Every task of ``split``, generated once (train: before any ``train_tasks`` cut)."""
        if split not in world.SPLITS:
            raise ValueError(f"warehouse has the splits {', '.join(world.SPLITS)}, not '{split}'")
        key = (split, self.options.seed_state_share if split == "train" else None)
        if split not in self._splits and key in _SPLITS_MADE:
            self._splits[split] = _SPLITS_MADE[key]
        if split not in self._splits:
            import numpy as np

            seed, n, recipe = world.SPLITS[split]
            if split == "train":
                recipe = world.seed_recipe(self.options.seed_state_share)
            rng = np.random.default_rng(seed)
            # test is drawn first and alone, then dev without test's requests, then train without
            # either's: no split holds a request of another, and dev and test do not depend on the
            # train split's recipe (seed_state_share)
            before = {"test": (), "dev": ("test",), "train": ("test", "dev")}[split]
            held_out = {t.query for s in before for t in self._all(s)}
            made: list[Task] = []
            while len(made) < n:
                d = world.draw_task(rng, recipe)
                if d.query in held_out or any(t.query == d.query for t in made):
                    continue
                i = len(made)
                made.append(self.build_task(
                    d.query, [_action(c) for c in d.actions], initial=d.initial, id=f"wh-{split}-{i}", split=split,
                    origin="seed" if split == "train" else "benchmark", payload={"skills": [s.name for s in d.skills]},
                ))
            self._splits[split] = _SPLITS_MADE[key] = made
        return list(self._splits[split])

    # ------------------------------------------------------------ exploration
    def sample_action(self) -> str:
        """A random call that can succeed now: counts, removals and moves name an item that is
        in the bin, and take at most what is there (the explorer's raw material)."""
        rng = self.np_random
        pick = lambda seq: seq[int(rng.integers(0, len(seq)))]  # noqa: E731
        present = [(b, i) for b in BINS for i in sorted(self.stock.get(b, {}))]
        kind = pick(["count", "add", "remove", "move"])
        if kind == "add" or not present:
            return _action(Call("add", {"n": int(rng.integers(1, 6)), "item": pick(ITEMS), "bin": pick(BINS)}))
        b, i = pick(present)
        if kind == "count":
            return _action(Call("count", {"item": i, "bin": b}))
        n = int(rng.integers(1, min(self.stock[b][i], MAX_AMOUNT) + 1))
        if kind == "remove":
            return _action(Call("remove", {"n": n, "item": i, "bin": b}))
        return _action(Call("move", {"n": n, "item": i, "src": b, "dst": pick([x for x in BINS if x != b])}))

    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        """As ``ToolEnv.make_task``, which keeps the parent's payload, with ``payload["skills"]``
        read from the candidate's own request: an explored task seldom has its parent's skills."""
        task = super().make_task(candidate, base)
        return task.model_copy(update={"payload": {**task.payload, "skills": world.skills_of(task.query)}})

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        """Phrase executed calls in the request language, recognising the state skills
        ("take all", "move all", a closing question) from counts and what used them. Calls the
        language cannot phrase as one request (no clean call, or more than ``world.MAX_SKILLS``
        skills) give "": the explorer then proposes nothing from them, since a proposed task
        must be a request the world's own tasks could make."""
        executed: list[tuple[Call, str]] = []
        for s in steps:
            calls = calls_in(s.action)
            if len(calls) == 1 and not s.info.get("error"):
                executed.append((Call(calls[0].name, calls[0].arguments), s.observation))
        query, _ = world.describe_calls(executed)
        return query
