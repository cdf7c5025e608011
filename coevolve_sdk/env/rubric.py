"""Grading as an object: a rubric of weighted checks, separate from the environment's logic.

Why a separate object: a grade is usually several questions ("is the final state right?",
"did the answer name the number?", "were no more than five calls made?") whose mix changes more
often than the environment does. Writing each as a small function and combining them with
weights keeps ``score()`` readable, lets a subclass add a check without copying the others,
and gives a per-check breakdown for debugging a surprising reward.

A check is any function ``fn(env) -> bool | float`` that reads the finished episode from the
environment (``env.task``, ``env.steps``, and whatever state the environment keeps). The rubric's
score is the weighted mean of its checks, in [0, 1]; a check marked ``required`` must pass
fully, otherwise the whole score is 0 (the usual all-or-nothing grading of tool-use tasks is a
rubric whose checks are all required).

Two checks cover the common "state comparison" pattern of :class:`~coevolve_sdk.env.toolenv.ToolEnv`:
:func:`state_matches` (the environment's ``snapshot()`` equals the task's ``payload["expected"]``)
and :func:`answer_matches` (the agent's final message contains ``payload["answer"]``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, Field

__all__ = ["Check", "Rubric", "RubricResult", "state_matches", "answer_matches", "as_json"]


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, keys become strings), so a live
    state compares equal to the copy stored in a task payload."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise TypeError(f"the state must be made of JSON values (dict, list, str, int, float, bool, None): {e}") from None


@dataclass(frozen=True)
class Check:
    """One question about a finished episode.

    ``fn(env)`` returns True/False or a float in [0, 1]. ``weight`` is its share of the score
    (relative to the other checks' weights); a ``required`` check that scores below 1 makes the
    whole score 0. ``name`` defaults to the function's name and labels the breakdown.
    """

    fn: Callable[[Any], bool | float]
    weight: float = 1.0
    required: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"Check needs a function fn(env) -> bool | float, got {type(self.fn).__name__}")
        if not (self.weight >= 0 and math.isfinite(self.weight)):
            raise ValueError(f"Check weight must be a finite number >= 0, got {self.weight}")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.fn, "__name__", "check"))

    def evaluate(self, env: Any) -> float:
        value = self.fn(env)
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if not isinstance(value, (int, float)) or not (0.0 <= float(value) <= 1.0):
            raise ValueError(f"rubric check '{self.name}' returned {value!r}; a check returns a bool or a float in [0, 1]")
        return float(value)


class RubricResult(BaseModel):
    """A score and the value of every check that made it up."""

    score: float
    checks: dict[str, float] = Field(default_factory=dict)
    failed_required: list[str] = Field(default_factory=list)


class Rubric:
    """Weighted checks combined into one score in [0, 1].

    ``Rubric([Check(state_matches, required=True), Check(short_answer, weight=0.2)])``: the state
    must be right, and the rest of the score is the weighted mean of all checks. Rubrics compose:
    ``rubric + Check(...)`` or ``rubric + other_rubric`` is a new rubric with both sets of checks.
    """

    def __init__(self, checks: list[Check | Callable[[Any], bool | float]]) -> None:
        self.checks: list[Check] = [c if isinstance(c, Check) else Check(c) for c in checks]
        if not self.checks:
            raise ValueError("a Rubric needs at least one check")
        names = [c.name for c in self.checks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"rubric checks must have distinct names; repeated: {', '.join(dup)} (pass name= to Check)")
        if sum(c.weight for c in self.checks) <= 0 and not any(c.required for c in self.checks):
            raise ValueError("a Rubric needs a check with a positive weight")

    def __add__(self, other: Rubric | Check) -> Rubric:
        more = other.checks if isinstance(other, Rubric) else [other]
        return Rubric([*self.checks, *more])

    def evaluate(self, env: Any) -> RubricResult:
        values: dict[str, float] = {}
        for c in self.checks:
            try:
                values[c.name] = c.evaluate(env)
            except Exception as e:
                # AgentEnv.step turns this into a GraderError that names the check
                if not getattr(e, "_coevolve_check", ""):
                    e._coevolve_check = c.name  # type: ignore[attr-defined]
                raise
        failed = [c.name for c in self.checks if c.required and values[c.name] < 1.0]
        total = sum(c.weight for c in self.checks)
        if failed:
            score = 0.0
        elif total <= 0:  # only required checks with weight 0, all passed
            score = 1.0
        else:
            score = sum(c.weight * values[c.name] for c in self.checks) / total
        return RubricResult(score=min(1.0, max(0.0, score)), checks=values, failed_required=failed)

    def score(self, env: Any) -> float:
        return self.evaluate(env).score

    def __repr__(self) -> str:
        inner = ", ".join(f"{c.name}{'*' if c.required else ''}:{c.weight:g}" for c in self.checks)
        return f"Rubric({inner})"


def state_matches(env: Any) -> bool:
    """The live state (``env.snapshot()``) equals the task's ``payload["expected"]``.

    ``ToolEnv.build_task`` and ``ToolEnv.make_task`` store that expected state by running the
    task's reference actions, so a task graded this way cannot be wrong about what "done" means.
    """
    task = env.task
    if task is None:
        return False
    if "expected" not in task.payload:
        raise ValueError(
            f"task '{task.id}' has no payload['expected'] to compare the state with: build it with "
            "env.build_task(...) (or let make_task do it), or grade with a rubric without state_matches"
        )
    return as_json(env.snapshot()) == task.payload["expected"]


def answer_matches(env: Any) -> bool:
    """When the task expects an answer (``payload["answer"]`` is not None), the agent's final
    message contains it; tasks without an expected answer pass."""
    task = env.task
    if task is None:
        return False
    want = task.payload.get("answer")
    if want is None:
        return True
    said = getattr(env, "answer", None)
    return said is not None and str(want) in said
