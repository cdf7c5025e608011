"""The columnar view of one training step that every detector in this package works on.

``SignalDetector.observe`` receives pydantic ``RolloutGroup`` records. Building and reading
pydantic objects costs microseconds per record, which is fine for a training loop (a step has
a few hundred trajectories) but not for replaying a million records from a run store, for a
benchmark, or for a detector used outside the loop. So each detector here has two layers:

* ``observe_batch(batch, history=None) -> Marks``: the detector's whole logic, on numpy
  arrays (:class:`StepBatch`), returning which records it marked plus the numbers behind it.
* ``observe(groups, history, step) -> list[Signal]``: the ``SignalDetector`` interface. It
  builds a :class:`StepBatch` from the groups, calls ``observe_batch`` and turns the marks into
  ``Signal`` records. There is no second implementation of the rules.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coevolve_sdk import CompetenceHistory, RolloutGroup, Signal, SignalDetector

__all__ = ["StepBatch", "Marks", "BatchDetector", "DEFAULT_SUCCESS_THRESHOLD", "signal_id"]

#: ``AgentEnv.success_threshold``'s default. Used only to derive ``successes`` for a batch built
#: from bare scores (benchmarks, tests); batches built from trajectories carry their own.
DEFAULT_SUCCESS_THRESHOLD = 0.5


class StepBatch:
    """One step's trajectories as arrays, grouped by task.

    Records are laid out group after group: group ``g`` (task ``task_ids[g]``) owns the records
    ``offsets[g]:offsets[g + 1]``. ``patterns`` (one action pattern per record) is needed by the
    rare detector only; ``trajectory_ids`` only to turn marks into ``Signal`` records.

    ``successes`` says which records succeeded, in the one sense the SDK uses everywhere: the
    trajectory's ``success`` flag, set by the rollout as ``score >= env.success_threshold``
    (evaluation and validation read the same flag). The forgetting and boundary detectors read
    it instead of comparing scores with a constant of their own. Without ``successes`` (a batch
    built from bare scores) it is ``scores >= success_threshold``.
    """

    __slots__ = ("step", "task_ids", "sizes", "offsets", "scores", "successes", "patterns", "trajectory_ids", "_group_of_record")

    def __init__(
        self,
        step: int,
        task_ids: Sequence[str],
        sizes: Sequence[int] | np.ndarray,
        scores: Sequence[float] | np.ndarray,
        patterns: Sequence[str] | None = None,
        trajectory_ids: Sequence[str] | None = None,
        successes: Sequence[bool] | np.ndarray | None = None,
        success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
    ) -> None:
        self.step = int(step)
        self.task_ids = list(task_ids)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.scores = np.asarray(scores, dtype=np.float64)
        self.patterns = patterns
        self.trajectory_ids = trajectory_ids
        if self.sizes.ndim != 1 or self.sizes.shape[0] != len(self.task_ids):
            raise ValueError(f"StepBatch: {len(self.task_ids)} task ids but sizes has shape {self.sizes.shape}; give one size per group")
        if self.scores.ndim != 1:
            raise ValueError(f"StepBatch: scores must be one-dimensional, got shape {self.scores.shape}")
        n = self.scores.shape[0]
        self.offsets = np.zeros(self.sizes.shape[0] + 1, dtype=np.int64)
        if self.sizes.shape[0]:
            if int(self.sizes.min()) < 1:
                raise ValueError("StepBatch: every group needs at least one trajectory (a size of 0 was given)")
            np.cumsum(self.sizes, out=self.offsets[1:])
        if int(self.offsets[-1]) != n:
            raise ValueError(f"StepBatch: the group sizes add up to {int(self.offsets[-1])} but {n} scores were given")
        if n and not (float(self.scores.min()) >= 0.0 and float(self.scores.max()) <= 1.0):
            bad = self.scores[~((self.scores >= 0.0) & (self.scores <= 1.0))][:3].tolist()
            raise ValueError(f"StepBatch: scores must lie in [0, 1] (normalised task scores), got {bad}")
        if patterns is not None and len(patterns) != n:
            raise ValueError(f"StepBatch: {len(patterns)} action patterns for {n} records")
        if trajectory_ids is not None and len(trajectory_ids) != n:
            raise ValueError(f"StepBatch: {len(trajectory_ids)} trajectory ids for {n} records")
        if successes is None:
            self.successes = self.scores >= success_threshold
        else:
            self.successes = np.asarray(successes, dtype=bool)
            if self.successes.shape != (n,):
                raise ValueError(f"StepBatch: successes has shape {self.successes.shape}; give one flag per record ({n})")
        self._group_of_record: np.ndarray | None = None

    @classmethod
    def from_groups(cls, groups: Sequence[RolloutGroup], step: int) -> StepBatch:
        """Read the fields the detectors need out of pydantic rollout groups (empty groups are skipped)."""
        task_ids: list[str] = []
        sizes: list[int] = []
        scores: list[float] = []
        patterns: list[str] = []
        traj_ids: list[str] = []
        successes: list[bool] = []
        for g in groups:
            if not g.trajectories:
                continue
            task_ids.append(g.task.id)
            sizes.append(len(g.trajectories))
            for t in g.trajectories:
                scores.append(t.score)
                patterns.append(t.action_pattern)
                traj_ids.append(t.id)
                successes.append(t.success)
        return cls(step, task_ids, sizes, scores, patterns, traj_ids, successes)

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @property
    def n_groups(self) -> int:
        return len(self.task_ids)

    @property
    def group_of_record(self) -> np.ndarray:
        """For every record, the index of its group."""
        if self._group_of_record is None:
            self._group_of_record = np.repeat(np.arange(self.n_groups, dtype=np.int64), self.sizes)
        return self._group_of_record

    def trajectory_id(self, record: int) -> str:
        if self.trajectory_ids is None:
            return f"{self.task_ids[int(self.group_of_record[record])]}#{record}"
        return self.trajectory_ids[record]


@dataclass(frozen=True)
class Marks:
    """What a detector marked in one :class:`StepBatch`.

    ``records`` are indices into the batch's records, ascending. ``detail`` holds the numbers
    the detector decided on (arrays, one row per group or per marked record, see each
    detector's ``observe_batch``), from which ``signals()`` writes each signal's evidence.
    """

    kind: str
    step: int
    records: np.ndarray
    detail: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.records.shape[0])


def signal_id(kind: str, step: int, trajectory_id: str) -> str:
    """Deterministic, readable signal ids: a resumed run re-creates the very same ids."""
    return f"sig-{kind}-{step}-{trajectory_id}"


class BatchDetector(SignalDetector):
    """A ``SignalDetector`` whose rules live in ``observe_batch`` (arrays) and ``signals`` (records)."""

    def observe(self, groups: list[RolloutGroup], history: CompetenceHistory, step: int) -> list[Signal]:
        batch = StepBatch.from_groups(groups, step)
        marks = self.observe_batch(batch, history)
        return self.signals(batch, marks)

    @abstractmethod
    def observe_batch(self, batch: StepBatch, history: CompetenceHistory | None = None) -> Marks:
        """Apply the rule to one step and update the detector's state. The fast path."""

    @abstractmethod
    def signals(self, batch: StepBatch, marks: Marks) -> list[Signal]:
        """One ``Signal`` per marked record, with a human ``reason`` and numeric ``evidence``."""
