"""Builders shared by the tests of coevolve-signals: hand-written steps -> RolloutGroups -> signals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coevolve_sdk.evolution.signals import CompetenceHistory, SignalDetector
from coevolve_sdk.records import RolloutGroup, Signal, Task, Trajectory

#: One step: task id -> scores, or task id -> (scores, patterns). A list of (task, spec) pairs
#: is accepted too, for steps in which one task has two groups.
StepSpec = dict[str, Any] | list[tuple[str, Any]]


def tid(task: str, step: int, i: int) -> str:
    """Readable trajectory ids: ``a@2#0`` is the first trajectory of task a at step 2."""
    return f"{task}@{step}#{i}"


#: ``AgentEnv.success_threshold``'s default: the rollout sets ``success = score >= threshold``
THRESHOLD = 0.5


def group(step: int, task: str, scores: Sequence[float], patterns: Sequence[str] | None = None, start: int = 0,
          threshold: float = THRESHOLD) -> RolloutGroup:
    """A group as the rollout builds it: each trajectory's ``success`` is ``score >= threshold``."""
    pats = list(patterns) if patterns is not None else [""] * len(scores)
    assert len(pats) == len(scores)
    return RolloutGroup(
        task=Task(id=task, env="test", query=f"query of {task}"),
        step=step,
        trajectories=[
            Trajectory(id=tid(task, step, start + i), task_id=task, step=step, score=float(s), action_pattern=p,
                       success=float(s) >= threshold)
            for i, (s, p) in enumerate(zip(scores, pats))
        ],
    )


def groups_of(step: int, spec: StepSpec, threshold: float = THRESHOLD) -> list[RolloutGroup]:
    items = spec.items() if isinstance(spec, dict) else spec
    out: list[RolloutGroup] = []
    used: dict[str, int] = {}
    for task, v in items:
        scores, patterns = (v if isinstance(v, tuple) else (v, None))
        start = used.get(task, 0)
        out.append(group(step, task, scores, patterns, start, threshold))
        used[task] = start + len(scores)
    return out


def record(history: CompetenceHistory, groups: list[RolloutGroup], step: int) -> None:
    """What the core loop does after every detector observed a step."""
    for g in groups:
        for t in g.trajectories:
            history.record(g.task.id, step, t.score, t.success)


def walk(detector: SignalDetector, steps: Sequence[StepSpec], history: CompetenceHistory | None = None, first_step: int = 0,
         threshold: float = THRESHOLD) -> list[list[Signal]]:
    """Feed steps to ``detector`` like the loop does (success = score >= ``threshold``); the signals of each step."""
    history = history if history is not None else CompetenceHistory()
    out: list[list[Signal]] = []
    for i, spec in enumerate(steps):
        step = first_step + i
        gs = groups_of(step, spec, threshold)
        out.append(detector.observe(gs, history, step))
        record(history, gs, step)
    return out


def marked(signals_per_step: list[list[Signal]]) -> list[list[str]]:
    return [[s.trajectory_id for s in sigs] for sigs in signals_per_step]
