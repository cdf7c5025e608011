"""SignalDetector and the competence history the detectors read.

Detectors are pure logic over rollout groups: no model, no I/O. Everything they remember must
come back through ``state_dict``/``load_state_dict`` (JSON values only), because it is part of
every checkpoint and a resumed run must raise the same signals as an uninterrupted one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import Any, ClassVar

from pydantic import BaseModel

from coevolve_sdk.components.base import Component, ComponentOptions
from coevolve_sdk.records import RolloutGroup, Signal

__all__ = ["SignalDetector", "DetectorOptions", "CompetenceHistory"]


class DetectorOptions(ComponentOptions):
    pass


class CompetenceHistory:
    """Per task, the most recent trajectory outcomes (step, score, success), oldest first.

    ``success`` is the trajectory's own flag (``score >= env.success_threshold``), recorded as
    the rollout set it, so a detector reading the history judges success exactly as the rest of
    the SDK does. The loop records a step's outcomes only *after* every detector has observed
    that step, so a detector looking at the history sees earlier steps only. ``capacity``
    bounds memory; the forgetting window W must not exceed it.
    """

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._scores: dict[str, deque[tuple[int, float, bool]]] = {}

    def record(self, task_id: str, step: int, score: float, success: bool) -> None:
        """Remember one trajectory of ``task_id`` at ``step``: its score and its success flag."""
        q = self._scores.get(task_id)
        if q is None:
            q = self._scores[task_id] = deque(maxlen=self.capacity)
        q.append((step, float(score), bool(success)))

    def recent(self, task_id: str, window: int) -> list[float]:
        """The scores of the task's last ``window`` trajectories, oldest first."""
        q = self._scores.get(task_id)
        if not q:
            return []
        if window >= len(q):
            return [e[1] for e in q]
        return [e[1] for e in list(q)[-window:]]

    def entries(self, task_id: str) -> list[tuple[int, float]]:
        """(step, score) of every remembered trajectory of the task, oldest first."""
        return [(st, s) for st, s, _ in self._scores.get(task_id, ())]

    def outcomes(self, task_id: str) -> list[tuple[int, float, bool]]:
        """(step, score, success) of every remembered trajectory of the task, oldest first."""
        return list(self._scores.get(task_id, ()))

    def tasks(self) -> list[str]:
        return list(self._scores)

    def __len__(self) -> int:
        return len(self._scores)

    def state_dict(self) -> dict[str, Any]:
        """``{"capacity": n, "scores": {task_id: [[step, score, success], ...]}}`` (JSON values)."""
        return {"capacity": self.capacity, "scores": {k: [list(e) for e in v] for k, v in self._scores.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` wrote. Checkpoints written before the history kept success
        flags hold [step, score] pairs; the detectors of that version counted a score >= 0.5 as a
        success, so the flags are restored that way and a resumed run goes on as it would have."""
        self.capacity = int(state.get("capacity", self.capacity))
        self._scores = {
            k: deque((_outcome(e) for e in entries), maxlen=self.capacity)
            for k, entries in state.get("scores", {}).items()
        }


def _outcome(entry: list[Any]) -> tuple[int, float, bool]:
    if len(entry) == 2:  # a checkpoint written before success flags were kept
        step, score = entry
        return int(step), float(score), float(score) >= 0.5
    step, score, success = entry
    return int(step), float(score), bool(success)


class SignalDetector(Component, ABC):
    """Reads every step's rollout groups and marks trajectories worth the teacher's attention.

    ``kind`` is the signal kind the detector emits (``forgetting``, ``boundary``, ``rare`` or
    your own); it keys per-kind caps, counts and the teacher's guidance template.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = DetectorOptions
    #: One clause for the warning of an evolution round that found no signals: what this
    #: detector needs before it fires (a small run often lacks it). The core names no detector,
    #: so each detector explains its own silence.
    silent_hint: ClassVar[str] = ""

    @abstractmethod
    def observe(self, groups: list[RolloutGroup], history: CompetenceHistory, step: int) -> list[Signal]:
        """Signals for this step's groups. ``history`` holds earlier steps only."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def dedupe_signals(signals: list[Signal], default_cap: int | None = None) -> list[Signal]:
    """One signal per (task, kind) for an evolution round, then at most ``default_cap`` per kind.

    The merged signal keeps the first signal's id and trajectory and lists every marked
    trajectory in ``trajectory_ids`` and ``evidence['merged']``, so no evidence is thrown away.
    Order is preserved (earliest first), which makes the result deterministic.
    """
    merged: dict[tuple[str, str], Signal] = {}
    for s in signals:
        key = (s.task_id, s.kind)
        if key not in merged:
            first = s.model_copy(deep=True)
            first.trajectory_ids = list(dict.fromkeys([s.trajectory_id, *s.trajectory_ids]))
            first.evidence = {**s.evidence, "merged": 1}
            merged[key] = first
        else:
            m = merged[key]
            for tid in [s.trajectory_id, *s.trajectory_ids]:
                if tid not in m.trajectory_ids:
                    m.trajectory_ids.append(tid)
            m.evidence["merged"] = int(m.evidence.get("merged", 1)) + 1
    out: list[Signal] = []
    counts: dict[str, int] = {}
    for s in merged.values():
        if default_cap is not None and counts.get(s.kind, 0) >= default_cap:
            continue
        counts[s.kind] = counts.get(s.kind, 0) + 1
        out.append(s)
    return out
