"""Forgetting signal: a task the policy solved recently fails now.

Rule (paper Section 3.1, after Toneva et al.'s "example forgetting"): for each task keep the W
most recent scores from *earlier* steps. A trajectory of the current step that scores < 0.5 on a
task whose window holds a score >= 0.5 is marked, and only that trajectory.

W counts trajectory scores, not steps: the loop records every trajectory's score in the
competence history, so W = 24 is the last three visits of a task at the paper's group size K = 8.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevolve_sdk.signals import CompetenceHistory
from coevolve_sdk.types import Signal

from .batch import SUCCESS_THRESHOLD, BatchDetector, Marks, StepBatch, signal_id

__all__ = ["ForgettingDetector", "ForgettingOptions"]

_EMPTY = -1.0  # marks an unused slot of a window; never >= 0.5, never a real score
_STATE_FORMAT = 1


class ForgettingOptions(BaseModel):
    """Options of the ``forgetting`` detector."""

    model_config = ConfigDict(extra="forbid")

    window: int = Field(
        24,
        ge=1,
        le=100_000,
        description=(
            "W: how many of a task's most recent earlier trajectory scores are remembered. "
            "24 = the last 3 visits at group size K = 8."
        ),
    )


class ForgettingDetector(BatchDetector):
    """Marks a failing trajectory (< 0.5) of a task that scored >= 0.5 within its last W earlier scores.

    State: per task, its last W scores (a ring buffer row). It is updated with a step's scores
    only after that step was judged, so a window always holds earlier steps only, exactly like the
    core's ``CompetenceHistory``. A task this detector has never seen is seeded from the
    ``history`` given to ``observe`` (earlier steps only), so a detector added to a resumed run
    starts with the run's memory instead of a blank one.
    """

    name: ClassVar[str] = "forgetting"
    kind: ClassVar[str] = "forgetting"
    Options: ClassVar[type[BaseModel]] = ForgettingOptions

    def __init__(self, options: BaseModel | None = None, context: Any = None) -> None:
        super().__init__(options, context)
        self.options: ForgettingOptions
        self._w = int(self.options.window)
        self._reset()

    # ------------------------------------------------------------------ state
    def _reset(self, capacity: int = 64) -> None:
        self._index: dict[str, int] = {}
        self._tasks: list[str] = []
        self._buf = np.full((capacity, self._w), _EMPTY, dtype=np.float64)
        self._count = np.zeros(capacity, dtype=np.int64)

    def _grow(self) -> None:
        cap = self._buf.shape[0] * 2
        buf = np.full((cap, self._w), _EMPTY, dtype=np.float64)
        buf[: self._buf.shape[0]] = self._buf
        count = np.zeros(cap, dtype=np.int64)
        count[: self._count.shape[0]] = self._count
        self._buf, self._count = buf, count

    def _add_task(self, task_id: str, seed: list[float]) -> int:
        row = len(self._tasks)
        if row == self._buf.shape[0]:
            self._grow()
        self._index[task_id] = row
        self._tasks.append(task_id)
        seed = seed[-self._w :]
        if seed:
            self._buf[row, : len(seed)] = seed
            self._count[row] = len(seed)
        return row

    def _rows(self, task_ids: list[str], history: CompetenceHistory | None, step: int) -> list[int]:
        get = self._index.get
        rows = [get(t, -1) for t in task_ids]
        if -1 in rows:
            for i, r in enumerate(rows):
                if r == -1:
                    t = task_ids[i]
                    r = get(t, -1)  # the same new task may appear twice in one step
                    if r == -1:
                        seed = [] if history is None else [s for st, s in history.entries(t) if st < step]
                        r = self._add_task(t, seed)
                    rows[i] = r
        return rows

    def window(self, task_id: str) -> list[float]:
        """The task's remembered scores, oldest first (empty for an unknown task)."""
        row = self._index.get(task_id)
        if row is None:
            return []
        return self._chronological(self._buf[row], int(self._count[row]))

    def _chronological(self, ring: np.ndarray, filled: int) -> list[float]:
        if filled <= self._w:
            return ring[:filled].tolist()
        start = filled % self._w
        return ring[start:].tolist() + ring[:start].tolist()

    # ------------------------------------------------------------------ rule
    def observe_batch(self, batch: StepBatch, history: CompetenceHistory | None = None) -> Marks:
        """Mark failing records of tasks with a solved score in their window; then remember the step.

        ``detail``: ``windows`` (one ring-buffer row per group, as it was before this step) and
        ``filled`` (how many scores each group's task had seen before this step).
        """
        if batch.n_groups == 0:
            return Marks(self.kind, batch.step, np.zeros(0, dtype=np.int64), {})
        rows = self._rows(batch.task_ids, history, batch.step)
        rows_arr = np.asarray(rows, dtype=np.int64)
        windows = self._buf[rows_arr]  # a copy: the state before this step
        filled = self._count[rows_arr]
        solved_before = (windows >= SUCCESS_THRESHOLD).any(axis=1)
        if solved_before.any():
            marked = np.repeat(solved_before, batch.sizes) & (batch.scores < SUCCESS_THRESHOLD)
            records = np.flatnonzero(marked)
        else:
            records = np.zeros(0, dtype=np.int64)
        self._remember(rows, rows_arr, batch)
        return Marks(self.kind, batch.step, records, {"windows": windows, "filled": filled})

    def _remember(self, rows: list[int], rows_arr: np.ndarray, batch: StepBatch) -> None:
        w = self._w
        sizes = batch.sizes
        scores = batch.scores
        if len(set(rows)) != len(rows):
            # A task with two groups in one step: append group after group, in order.
            for g, r in enumerate(rows):
                lo, hi = int(batch.offsets[g]), int(batch.offsets[g + 1])
                tail = scores[max(lo, hi - w) : hi]
                first = int(self._count[r]) + (hi - lo) - tail.shape[0]
                self._buf[r, (first + np.arange(tail.shape[0])) % w] = tail
                self._count[r] += hi - lo
            return
        n = scores.shape[0]
        within = np.arange(n, dtype=np.int64) - np.repeat(batch.offsets[:-1], sizes)
        rec_rows = np.repeat(rows_arr, sizes)
        cols = (np.repeat(self._count[rows_arr], sizes) + within) % w
        if int(sizes.max()) > w:  # only the last W scores of a big group survive; write only those
            keep = within >= np.repeat(sizes - w, sizes)
            rec_rows, cols, vals = rec_rows[keep], cols[keep], scores[keep]
        else:
            vals = scores
        self._buf[rec_rows, cols] = vals
        self._count[rows_arr] += sizes

    def signals(self, batch: StepBatch, marks: Marks) -> list[Signal]:
        out: list[Signal] = []
        if not len(marks):
            return out
        group_of = batch.group_of_record
        windows, filled = marks.detail["windows"], marks.detail["filled"]
        cache: dict[int, list[float]] = {}
        for r in marks.records.tolist():
            g = int(group_of[r])
            window = cache.get(g)
            if window is None:
                window = cache[g] = self._chronological(windows[g], int(filled[g]))
            solved = sum(1 for s in window if s >= SUCCESS_THRESHOLD)
            best = max(window)
            score = float(batch.scores[r])
            task, tid = batch.task_ids[g], batch.trajectory_id(r)
            out.append(
                Signal(
                    id=signal_id(self.kind, batch.step, tid),
                    kind=self.kind,
                    task_id=task,
                    trajectory_id=tid,
                    step=batch.step,
                    reason=(
                        f"Task '{task}' scored {score:.2f} (< 0.5) at step {batch.step}, but {solved} of its "
                        f"{len(window)} most recent earlier scores reached 0.5 (best {best:.2f}): "
                        f"a skill the policy had is failing now."
                    ),
                    evidence={
                        "score": score,
                        "threshold": SUCCESS_THRESHOLD,
                        "window": window,
                        "window_size": self._w,
                        "solved_in_window": solved,
                        "best_in_window": best,
                    },
                    trajectory_ids=[tid],
                )
            )
        return out

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        """``{"format": 1, "window": W, "tasks": {task_id: [scores, oldest first]}}`` (JSON values)."""
        return {
            "format": _STATE_FORMAT,
            "window": self._w,
            "tasks": {t: self._chronological(self._buf[r], int(self._count[r])) for t, r in self._index.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the windows. A state saved with a larger W keeps only the last W scores per task."""
        if not isinstance(state, dict) or not isinstance(state.get("tasks"), dict):
            raise ValueError("forgetting detector state must be a dict with a 'tasks' mapping of task id -> list of scores")
        if state.get("format", _STATE_FORMAT) != _STATE_FORMAT:
            raise ValueError(f"forgetting detector state has format {state.get('format')!r}; this version reads format {_STATE_FORMAT}")
        tasks: dict[str, Any] = state["tasks"]
        self._reset(capacity=max(64, 1 << max(len(tasks) - 1, 0).bit_length()))
        for task_id, scores in tasks.items():
            vals = [float(s) for s in scores]
            if any(not 0.0 <= v <= 1.0 for v in vals):
                raise ValueError(f"forgetting detector state: task '{task_id}' has a score outside [0, 1]: {vals}")
            self._add_task(str(task_id), vals)
