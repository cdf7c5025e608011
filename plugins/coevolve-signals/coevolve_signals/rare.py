"""Rare signal: an action pattern that the policy seldom takes, yet takes more than once.

Rule (paper Section 3.1): every trajectory has an action pattern p (``Trajectory.action_pattern``,
filled by the environment: by default its ordered tool names joined by ``>``). Keep cumulative
counts c_p over all N observed patterns, this step's included. Once N >= N_min, every trajectory of
the current step whose pattern has 0 < c_p / N < θ / 100 is marked. The comparison is done in
integers and one product, ``100 * c_p < θ * N``, so that a share exactly at the threshold is never
rare because of a rounding error.

Two choices the paper leaves open, both options:

* ``min_count`` (default 2): the paper describes rare patterns as ones that "recur across multiple
  trajectories" (systematic under-exploration, not one-off noise), while its formula only asks
  c_p > 0. Under the literal formula every pattern seen for the first time after N > 100/θ is
  rare, and an LLM policy's long tail of one-off tool sequences would crowd the signal. So by
  default a pattern must have been seen at least twice; ``min_count: 1`` gives the literal rule.
* ``count_empty`` (default false): a trajectory that called no tool has no action pattern. It is
  neither counted in N nor marked, so early policies that often answer without tools do not
  dilute the shares of the patterns that exist. ``count_empty: true`` treats "no tool call" as a
  pattern like any other.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevolve_sdk import CompetenceHistory, Signal

from .batch import BatchDetector, Marks, StepBatch, signal_id

__all__ = ["RareDetector", "RareOptions"]

_STATE_FORMAT = 1
_NO_TOOLS = "(no tool call)"


class RareOptions(BaseModel):
    """Options of the ``rare`` detector."""

    model_config = ConfigDict(extra="forbid")

    theta: float = Field(5.0, gt=0.0, lt=100.0, description="θ in percent: a pattern is rare while c_p / N < θ / 100 (paper: 5).")
    n_min: int = Field(
        512,
        ge=1,
        description="N_min: no rare signal until this many patterns were observed. 512 = two steps of 32 tasks x 8 trajectories.",
    )
    min_count: int = Field(
        2,
        ge=1,
        description="A pattern must have been seen at least this often to be rare (2: it recurs; 1: the paper's literal c_p > 0).",
    )
    count_empty: bool = Field(
        False,
        description="Count trajectories without any tool call as the pattern '' (default: they are ignored).",
    )


class RareDetector(BatchDetector):
    """Marks trajectories whose action pattern is rare but recurring among all patterns seen so far.

    State: the count c_p of every pattern seen and their total N (both grow for the whole run).
    Memory grows with the number of *distinct* patterns, not with the number of trajectories.
    """

    name: ClassVar[str] = "rare"
    kind: ClassVar[str] = "rare"
    silent_hint: ClassVar[str] = "rare signals need enough trajectories before a pattern counts as rare (the rare detector's n_min)"
    Options: ClassVar[type[BaseModel]] = RareOptions

    def __init__(self, options: BaseModel | None = None, context: Any = None) -> None:
        super().__init__(options, context)
        self.options: RareOptions
        self._theta = float(self.options.theta)
        self._n_min = int(self.options.n_min)
        self._min_count = int(self.options.min_count)
        self._count_empty = bool(self.options.count_empty)
        self._reset()

    # ------------------------------------------------------------------ state
    def _reset(self, capacity: int = 1024) -> None:
        # Pattern id 0 is always the empty pattern, so "no tool call" is one integer comparison.
        self._ids: dict[str, int] = {"": 0}
        self._patterns: list[str] = [""]
        self._counts = np.zeros(capacity, dtype=np.int64)
        self._total = 0

    def _new_pattern(self, pattern: str) -> int:
        pid = len(self._patterns)
        if pid == self._counts.shape[0]:
            grown = np.zeros(pid * 2, dtype=np.int64)
            grown[:pid] = self._counts
            self._counts = grown
        self._ids[pattern] = pid
        self._patterns.append(pattern)
        return pid

    @property
    def total(self) -> int:
        """N: the number of patterns observed so far."""
        return self._total

    def count(self, pattern: str) -> int:
        """c_p: how often ``pattern`` was observed so far."""
        pid = self._ids.get(pattern)
        return 0 if pid is None else int(self._counts[pid])

    # ------------------------------------------------------------------ rule
    def observe_batch(self, batch: StepBatch, history: CompetenceHistory | None = None) -> Marks:
        """Count this step's patterns, then mark its records whose pattern is rare.

        ``detail``: ``c_p`` (the count of each marked record's pattern, this step included) and
        ``N`` (the total after this step).
        """
        patterns = batch.patterns
        if patterns is None:
            raise ValueError("the rare detector needs the action pattern of every record (StepBatch.patterns is None)")
        empty = np.zeros(0, dtype=np.int64)
        if not len(patterns):
            return Marks(self.kind, batch.step, empty, {"c_p": empty, "N": self._total})
        get = self._ids.get
        ids = [get(p, -1) for p in patterns]
        if -1 in ids:
            for i, pid in enumerate(ids):
                if pid == -1:
                    p = patterns[i]
                    pid = get(p, -1)  # a new pattern may occur twice in one step
                    ids[i] = pid if pid != -1 else self._new_pattern(p)
        arr = np.array(ids, dtype=np.int64)
        counted = arr if self._count_empty else arr[arr != 0]
        if counted.shape[0]:
            np.add.at(self._counts, counted, 1)
            self._total += int(counted.shape[0])
        if self._total < self._n_min:
            return Marks(self.kind, batch.step, empty, {"c_p": empty, "N": self._total})
        c = self._counts[arr]
        rare = (c >= self._min_count) & (c * 100 < self._theta * self._total)
        if not self._count_empty:
            rare &= arr != 0
        records = np.flatnonzero(rare)
        return Marks(self.kind, batch.step, records, {"c_p": c[records], "N": self._total})

    def signals(self, batch: StepBatch, marks: Marks) -> list[Signal]:
        out: list[Signal] = []
        if not len(marks):
            return out
        assert batch.patterns is not None
        group_of = batch.group_of_record
        n = int(marks.detail["N"])
        for r, c in zip(marks.records.tolist(), marks.detail["c_p"].tolist()):
            g = int(group_of[r])
            pattern = batch.patterns[r]
            task, tid = batch.task_ids[g], batch.trajectory_id(r)
            share = c / n
            shown = pattern if pattern else _NO_TOOLS
            out.append(
                Signal(
                    id=signal_id(self.kind, batch.step, tid),
                    kind=self.kind,
                    vary="trajectory",  # vary the rare behaviour itself, not the task it happened on
                    task_id=task,
                    trajectory_id=tid,
                    step=batch.step,
                    reason=(
                        f"Action pattern '{shown}' has been taken {c} times among the {n} patterns seen so "
                        f"far ({share:.2%} < θ = {self._theta:g}%): the policy rarely explores it, yet it recurs."
                    ),
                    evidence={
                        "pattern": pattern,
                        "c_p": c,
                        "N": n,
                        "share": share,
                        "theta": self._theta,
                        "n_min": self._n_min,
                        "min_count": self._min_count,
                        "score": float(batch.scores[r]),
                    },
                    trajectory_ids=[tid],
                )
            )
        return out

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        """``{"format": 1, "N": total, "counts": {pattern: c_p}}`` (JSON values; zero counts left out)."""
        counts = self._counts
        return {
            "format": _STATE_FORMAT,
            "N": self._total,
            "counts": {p: int(counts[i]) for i, p in enumerate(self._patterns) if counts[i]},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("counts"), dict):
            raise ValueError("rare detector state must be a dict with a 'counts' mapping of pattern -> count")
        if state.get("format", _STATE_FORMAT) != _STATE_FORMAT:
            raise ValueError(f"rare detector state has format {state.get('format')!r}; this version reads format {_STATE_FORMAT}")
        counts: dict[str, Any] = state["counts"]
        self._reset(capacity=max(1024, 1 << len(counts).bit_length()))
        total = 0
        for pattern, c in counts.items():
            c = int(c)
            if c < 0:
                raise ValueError(f"rare detector state: pattern {pattern!r} has a negative count {c}")
            pid = self._ids.get(pattern)
            if pid is None:
                pid = self._new_pattern(str(pattern))
            self._counts[pid] = c
            total += c
        n = int(state.get("N", total))
        if n != total:
            raise ValueError(f"rare detector state: N = {n} but the counts add up to {total}")
        self._total = n
