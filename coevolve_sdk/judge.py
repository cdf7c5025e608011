"""The teacher's judge as a second opinion on training rollouts (``evolution.judge_rollouts``).

A synthetic task's grader is derived from its own reference actions, so it can pass a rollout
that does what the actions do but not what the query asks. With ``judge_rollouts: confirm``
every successful rollout of a synthetic task counts only if the teacher's judge agrees; a judge
that abstains (None) leaves the grade as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .teacher import Teacher, usage_meter
from .types import RolloutGroup

if TYPE_CHECKING:
    from .store import RunStore

__all__ = ["second_opinion"]


def second_opinion(teacher: Teacher, groups: list[RolloutGroup], store: "RunStore | None" = None, step: int = 0) -> dict[str, float]:
    """Judge the successes on synthetic tasks in place (a rejected one scores 0); returns the
    metrics. What the judge's calls cost is a teacher bill in the store (round None)."""
    rejected = 0
    with usage_meter() as meter:
        for g in groups:
            if g.task.origin != "synthetic":
                continue
            for tr in g.trajectories:
                if not tr.success:
                    continue
                opinion = teacher.judge(g.task, tr)
                tr.info["judge"] = opinion
                if opinion is False:
                    tr.score, tr.success = 0.0, False
                    rejected += 1
    if meter.calls and store is not None:
        store.record_usage(step, None, None, [], meter)
    return {"judge/calls": float(meter.calls), "judge/rejected": float(rejected), "judge/cost_usd": meter.cost_usd}
