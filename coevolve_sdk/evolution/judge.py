"""The teacher's judge as a second opinion on training rollouts (``evolution.judge_rollouts``).

A synthetic task's grader is derived from its own reference actions, so it can pass a rollout
that does what the actions do but not what the query asks. With ``judge_rollouts: confirm``
every successful rollout of a synthetic task counts only if the teacher's judge agrees; a judge
that abstains (None) leaves the grade as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coevolve_sdk.evolution.teacher import Teacher, usage_meter
from coevolve_sdk.records import RolloutGroup

if TYPE_CHECKING:
    from coevolve_sdk.storage.store import RunStore

__all__ = ["second_opinion", "apply_opinions", "judge_step"]


def second_opinion(teacher: Teacher, groups: list[RolloutGroup], store: "RunStore | None" = None, step: int = 0) -> tuple[dict[str, bool | None], dict[str, float]]:
    """Ask the judge about every success on a synthetic task; returns its opinions by
    trajectory id (applied to ``groups`` here, see ``apply_opinions``) and the metrics.

    Runs on the main process only, over the gathered groups of every process, like every other
    teacher call: what the judge's calls cost is a teacher bill in the store (round None). The
    other processes receive the opinions by broadcast and apply them to their own share."""
    opinions: dict[str, bool | None] = {}
    with usage_meter() as meter:
        for g in groups:
            if g.task.origin != "synthetic":
                continue
            for tr in g.trajectories:
                if tr.success:
                    opinions[tr.id] = teacher.judge(g.task, tr)
    rejected = apply_opinions(groups, opinions)
    if meter.calls and store is not None:
        store.record_usage(step, None, None, [], meter)
    return opinions, {"judge/calls": float(meter.calls), "judge/rejected": float(rejected), "judge/cost_usd": meter.cost_usd}


def apply_opinions(groups: list[RolloutGroup], opinions: dict[str, bool | None]) -> int:
    """Record each opinion in its trajectory's info; a rejected success scores 0. Idempotent
    (the main process applies them once to the gathered groups and once to its own share, which
    may be the same objects). Returns how many successes were rejected."""
    rejected = 0
    for g in groups:
        for tr in g.trajectories:
            if tr.id not in opinions:
                continue
            tr.info["judge"] = opinions[tr.id]
            if opinions[tr.id] is False and tr.success:
                tr.score, tr.success = 0.0, False
                rejected += 1
    return rejected


def judge_step(teacher: Teacher, algorithm: Any, own: list[RolloutGroup], gathered: list[RolloutGroup],
               store: "RunStore | None", step: int) -> dict[str, float]:
    """One training step's second opinions: the main process judges the gathered groups, every
    process applies the broadcast opinions to its own share before the update. Returns the
    metrics (empty on the other processes)."""
    opinions, metrics = second_opinion(teacher, gathered, store, step) if algorithm.processes.is_main_process else (None, {})
    apply_opinions(own, algorithm.processes.broadcast(opinions))
    return metrics
