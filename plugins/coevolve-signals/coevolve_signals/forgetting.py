"""Forgetting signal: a task the policy solved recently fails now.

Rule (paper Section 3.1, after Toneva et al.'s "example forgetting"): for each task keep the W
most recent outcomes from *earlier* steps. A trajectory of the current step that failed on a
task whose window holds a success is marked, and only that trajectory.

Success is the trajectory's ``success`` flag, the SDK's one definition (``score >=
env.success_threshold``, 0.5 unless the environment says otherwise), so the detector agrees
with evaluation and validation on what solved means. The window keeps each outcome's score
too, for the signal's evidence.

W counts trajectories, not steps: the loop records every trajectory in the competence history,
so W = 24 is the last three visits of a task at the paper's group size K = 8.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevolve_sdk import CompetenceHistory, Signal

from .batch import BatchDetector, Marks, StepBatch, signal_id

__all__ = ["ForgettingDetector", "ForgettingOptions"]

_EMPTY = -1.0  # fills an unused slot of a window's scores (its success flag stays False)
#: 2: per task its scores and its success flags; 1 (read only): scores alone, written when the
#: detector judged success as score >= 0.5, so that is how the flags are restored from it
_STATE_FORMAT = 2
_V1_SOLVED_AT = 0.5


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
    """Marks a failed trajectory of a task that succeeded within its last W earlier trajectories.

    State: per task, its last W scores and success flags (ring buffer rows). It is updated with a step's outcomes
    only after that step was judged, so a window always holds earlier steps only, exactly like the
    core's ``CompetenceHistory``. A task this detector has never seen is seeded from the
    ``history`` given to ``observe`` (earlier steps only), so a detector added to a resumed run
    starts with the run's memory instead of a blank one.
    """

    name: ClassVar[str] = "forgetting"
    kind: ClassVar[str] = "forgetting"
    silent_hint: ClassVar[str] = "forgetting signals need a task that was solved in earlier steps and now fails (the forgetting detector's window)"
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
        self._ok = np.zeros((capacity, self._w), dtype=bool)
        self._count = np.zeros(capacity, dtype=np.int64)

    def _grow(self) -> None:
        cap = self._buf.shape[0] * 2
        buf = np.full((cap, self._w), _EMPTY, dtype=np.float64)
        buf[: self._buf.shape[0]] = self._buf
        ok = np.zeros((cap, self._w), dtype=bool)
        ok[: self._ok.shape[0]] = self._ok
        count = np.zeros(cap, dtype=np.int64)
        count[: self._count.shape[0]] = self._count
        self._buf, self._ok, self._count = buf, ok, count

    def _add_task(self, task_id: str, seed: list[tuple[float, bool]]) -> int:
        """A new row for ``task_id``, filled with ``seed``: (score, success) pairs, oldest first."""
        row = len(self._tasks)
        if row == self._buf.shape[0]:
            self._grow()
        self._index[task_id] = row
        self._tasks.append(task_id)
        seed = seed[-self._w :]
        if seed:
            self._buf[row, : len(seed)] = [s for s, _ in seed]
            self._ok[row, : len(seed)] = [bool(ok) for _, ok in seed]
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
                        seed = [] if history is None else [(s, ok) for st, s, ok in history.outcomes(t) if st < step]
                        r = self._add_task(t, seed)
                    rows[i] = r
        return rows

    def window(self, task_id: str) -> list[float]:
        """The task's remembered scores, oldest first (empty for an unknown task)."""
        row = self._index.get(task_id)
        if row is None:
            return []
        return self._chronological(self._buf[row], int(self._count[row]))

    def window_successes(self, task_id: str) -> list[bool]:
        """The success flags of :meth:`window`'s scores, in the same order."""
        row = self._index.get(task_id)
        if row is None:
            return []
        return self._chronological(self._ok[row], int(self._count[row]))

    def _chronological(self, ring: np.ndarray, filled: int) -> list[Any]:
        if filled <= self._w:
            return ring[:filled].tolist()
        start = filled % self._w
        return ring[start:].tolist() + ring[:start].tolist()

    # ------------------------------------------------------------------ rule
    def observe_batch(self, batch: StepBatch, history: CompetenceHistory | None = None) -> Marks:
        """Mark failed records of tasks with a success in their window; then remember the step.

        ``detail``: ``windows`` and ``solved`` (each group's ring-buffer rows of scores and
        success flags, as they were before this step) and ``filled`` (how many trajectories each
        group's task had seen before this step).
        """
        if batch.n_groups == 0:
            return Marks(self.kind, batch.step, np.zeros(0, dtype=np.int64), {})
        rows = self._rows(batch.task_ids, history, batch.step)
        rows_arr = np.asarray(rows, dtype=np.int64)
        windows = self._buf[rows_arr]  # copies: the state before this step
        solved = self._ok[rows_arr]
        filled = self._count[rows_arr]
        solved_before = solved.any(axis=1)
        if solved_before.any():
            marked = np.repeat(solved_before, batch.sizes) & ~batch.successes
            records = np.flatnonzero(marked)
        else:
            records = np.zeros(0, dtype=np.int64)
        self._remember(rows, rows_arr, batch)
        return Marks(self.kind, batch.step, records, {"windows": windows, "solved": solved, "filled": filled})

    def _remember(self, rows: list[int], rows_arr: np.ndarray, batch: StepBatch) -> None:
        w = self._w
        sizes = batch.sizes
        scores = batch.scores
        oks = batch.successes
        if len(set(rows)) != len(rows):
            # A task with two groups in one step: append group after group, in order.
            for g, r in enumerate(rows):
                lo, hi = int(batch.offsets[g]), int(batch.offsets[g + 1])
                start = max(lo, hi - w)
                first = int(self._count[r]) + (hi - lo) - (hi - start)
                cols_g = (first + np.arange(hi - start)) % w
                self._buf[r, cols_g] = scores[start:hi]
                self._ok[r, cols_g] = oks[start:hi]
                self._count[r] += hi - lo
            return
        n = scores.shape[0]
        within = np.arange(n, dtype=np.int64) - np.repeat(batch.offsets[:-1], sizes)
        rec_rows = np.repeat(rows_arr, sizes)
        cols = (np.repeat(self._count[rows_arr], sizes) + within) % w
        if int(sizes.max()) > w:  # only the last W outcomes of a big group survive; write only those
            keep = within >= np.repeat(sizes - w, sizes)
            rec_rows, cols, vals, flags = rec_rows[keep], cols[keep], scores[keep], oks[keep]
        else:
            vals, flags = scores, oks
        self._buf[rec_rows, cols] = vals
        self._ok[rec_rows, cols] = flags
        self._count[rows_arr] += sizes

    def signals(self, batch: StepBatch, marks: Marks) -> list[Signal]:
        out: list[Signal] = []
        if not len(marks):
            return out
        group_of = batch.group_of_record
        windows, oks, filled = marks.detail["windows"], marks.detail["solved"], marks.detail["filled"]
        cache: dict[int, tuple[list[float], list[bool]]] = {}
        for r in marks.records.tolist():
            g = int(group_of[r])
            got = cache.get(g)
            if got is None:
                got = cache[g] = (self._chronological(windows[g], int(filled[g])), self._chronological(oks[g], int(filled[g])))
            window, window_ok = got
            solved = sum(window_ok)
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
                        f"Task '{task}' failed at step {batch.step} (score {score:.2f}), but {solved} of its "
                        f"{len(window)} most recent earlier trajectories succeeded (best score {best:.2f}): "
                        f"a skill the policy had is failing now."
                    ),
                    evidence={
                        "score": score,
                        "window": window,
                        "window_successes": window_ok,
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
        """``{"format": 2, "window": W, "tasks": {task_id: [scores]}, "successes": {task_id: [flags]}}``,
        oldest first (JSON values)."""
        return {
            "format": _STATE_FORMAT,
            "window": self._w,
            "tasks": {t: self._chronological(self._buf[r], int(self._count[r])) for t, r in self._index.items()},
            "successes": {t: self._chronological(self._ok[r], int(self._count[r])) for t, r in self._index.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the windows. A state saved with a larger W keeps only the last W outcomes per task.

        A format-1 state (written before the detector read the trajectories' success flags)
        holds scores only; it was written by a detector that counted a score >= 0.5 as a
        success, so the flags are restored that way and a resumed run goes on as it would have.
        """
        if not isinstance(state, dict) or not isinstance(state.get("tasks"), dict):
            raise ValueError("forgetting detector state must be a dict with a 'tasks' mapping of task id -> list of scores")
        fmt = state.get("format", _STATE_FORMAT)
        if fmt not in (1, _STATE_FORMAT):
            raise ValueError(f"forgetting detector state has format {fmt!r}; this version reads formats 1 and {_STATE_FORMAT}")
        tasks: dict[str, Any] = state["tasks"]
        flags: dict[str, Any] = state.get("successes", {}) if fmt == _STATE_FORMAT else {}
        if not isinstance(flags, dict):
            raise ValueError("forgetting detector state: 'successes' must map task id -> list of success flags")
        self._reset(capacity=max(64, 1 << max(len(tasks) - 1, 0).bit_length()))
        for task_id, scores in tasks.items():
            vals = [float(s) for s in scores]
            if any(not 0.0 <= v <= 1.0 for v in vals):
                raise ValueError(f"forgetting detector state: task '{task_id}' has a score outside [0, 1]: {vals}")
            if fmt == 1:
                ok = [v >= _V1_SOLVED_AT for v in vals]
            else:
                ok = flags.get(task_id)
                if not isinstance(ok, list) or len(ok) != len(vals) or not all(isinstance(x, bool) for x in ok):
                    raise ValueError(
                        f"forgetting detector state: task '{task_id}' needs one success flag (true/false) per score "
                        f"in 'successes'; got {ok!r} for {len(vals)} scores"
                    )
            self._add_task(str(task_id), list(zip(vals, ok)))
