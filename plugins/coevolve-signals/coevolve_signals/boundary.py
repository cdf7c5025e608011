"""Boundary signal: a task's group mixes success and failure.

Rule (paper Section 3.1): a task's group of K trajectories in one step holds a success and a
failure; then all K trajectories are marked. Success is the trajectory's ``success`` flag, the
SDK's one definition (``score >= env.success_threshold``, 0.5 unless the environment says
otherwise), so the detector agrees with evaluation and validation on what solved means. With
binary rewards these are exactly the groups in which GRPO's advantages are not all zero, i.e.
where the policy is still undecided.

One ``Signal`` is emitted per marked trajectory (K per mixed group), not one per group: each
signal is then "one marked trajectory" for every detector in this package, the store's per-kind
counts count marked trajectories like the paper's Fig. 4, and the core's ``dedupe_signals``
still folds a round's boundary signals into one per task (keeping every trajectory id) before the
teacher sees them. Each signal's evidence carries the whole group's scores and trajectory ids,
so the teacher can contrast successes and failures from any one of them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from coevolve_sdk import CompetenceHistory, Signal

from .batch import BatchDetector, Marks, StepBatch, signal_id

__all__ = ["BoundaryDetector", "BoundaryOptions"]


class BoundaryOptions(BaseModel):
    """The ``boundary`` detector has no options: the paper fixes the rule completely."""

    model_config = ConfigDict(extra="forbid")


class BoundaryDetector(BatchDetector):
    """Marks all trajectories of every group that holds both a success and a failure.

    Stateless: it looks at one step's groups only, so its checkpoint state is empty.
    """

    name: ClassVar[str] = "boundary"
    kind: ClassVar[str] = "boundary"
    silent_hint: ClassVar[str] = "boundary signals need a rollout group that mixes success and failure: tasks neither always solved nor never solved"
    Options: ClassVar[type[BaseModel]] = BoundaryOptions

    def observe_batch(self, batch: StepBatch, history: CompetenceHistory | None = None) -> Marks:
        """``detail``: ``mixed``, a boolean per group."""
        if batch.n_groups == 0:
            return Marks(self.kind, batch.step, np.zeros(0, dtype=np.int64), {"mixed": np.zeros(0, dtype=bool)})
        starts = batch.offsets[:-1]
        ok = batch.successes
        mixed = np.logical_or.reduceat(ok, starts) & ~np.logical_and.reduceat(ok, starts)
        if mixed.any():
            records = np.flatnonzero(np.repeat(mixed, batch.sizes))
        else:
            records = np.zeros(0, dtype=np.int64)
        return Marks(self.kind, batch.step, records, {"mixed": mixed})

    def signals(self, batch: StepBatch, marks: Marks) -> list[Signal]:
        out: list[Signal] = []
        if not len(marks):
            return out
        group_of = batch.group_of_record
        per_group: dict[int, tuple[list[float], list[bool], list[str], int, int]] = {}
        for r in marks.records.tolist():
            g = int(group_of[r])
            info = per_group.get(g)
            if info is None:
                lo, hi = int(batch.offsets[g]), int(batch.offsets[g + 1])
                scores = batch.scores[lo:hi].tolist()
                oks = batch.successes[lo:hi].tolist()
                ids = [batch.trajectory_id(i) for i in range(lo, hi)]
                wins = sum(oks)
                info = per_group[g] = (scores, oks, ids, wins, len(scores) - wins)
            scores, oks, ids, wins, losses = info
            task, tid = batch.task_ids[g], batch.trajectory_id(r)
            score = float(batch.scores[r])
            out.append(
                Signal(
                    id=signal_id(self.kind, batch.step, tid),
                    kind=self.kind,
                    task_id=task,
                    trajectory_id=tid,
                    step=batch.step,
                    reason=(
                        f"The {len(scores)} trajectories of task '{task}' at step {batch.step} mix {wins} "
                        f"success(es) with {losses} failure(s): the policy is at its decision boundary on "
                        f"this task; this trajectory scored {score:.2f} "
                        f"({'a success' if batch.successes[r] else 'a failure'})."
                    ),
                    evidence={
                        "score": score,
                        "success": bool(batch.successes[r]),
                        "group_size": len(scores),
                        "successes": wins,
                        "failures": losses,
                        "group_scores": scores,
                        "group_successes": oks,
                        "group_trajectory_ids": ids,
                    },
                    trajectory_ids=[tid],
                )
            )
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state not in ({}, None):
            raise ValueError(f"the boundary detector is stateless; expected an empty state, got {state!r}")
