"""The evolution stage: signals → reflection → re-exploration → abstraction → validation.

One round handles the signals buffered since the previous round. Signals are processed
concurrently (``workers``), each with an environment instance of its own and a usage meter, so
a slow teacher call holds up one signal, not the round. The round returns validated tasks; the
loop admits them (immediately in sync mode, at the next step boundary in async mode).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from .environment import AgentEnv
from .errors import BudgetExhausted
from .ids import id_stream
from .signals import dedupe_signals
from .store import RunStore
from .teacher import Teacher, describe_triplets, usage_meter
from .types import ExplorationContext, Lineage, Signal, Task, TeacherUsage, Trajectory
from .validation import Validator

__all__ = ["Evolver", "RoundResult"]


@dataclass
class RoundResult:
    round: int
    step: int
    signals_in: int = 0
    signals_used: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    candidates: int = 0
    accepted: list[Task] = field(default_factory=list)
    rejected: int = 0
    rejection_reasons: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    budget_exhausted: bool = False
    #: validated tasks left out because the round's admission cap was reached
    over_budget: int = 0
    seconds: float = 0.0
    usage: TeacherUsage = field(default_factory=TeacherUsage)

    def summary(self) -> dict[str, Any]:
        return {
            "signals_in": self.signals_in,
            "signals_used": self.signals_used,
            "by_kind": self.by_kind,
            "candidates": self.candidates,
            "accepted": len(self.accepted),
            "accepted_ids": [t.id for t in self.accepted],
            "rejected": self.rejected,
            "rejection_reasons": self.rejection_reasons,
            "failures": self.failures[:20],
            "budget_exhausted": self.budget_exhausted,
            "over_budget": self.over_budget,
            "seconds": self.seconds,
            "usage": self.usage.model_dump(),
        }


class Evolver:
    def __init__(
        self,
        teacher: Teacher,
        validator: Validator,
        make_env: Callable[[], AgentEnv],
        store: RunStore,
        *,
        workers: int = 2,
        max_signals_per_kind: int | None = 16,
        max_admitted: int | None = None,
        on_proposed: Callable[[int, list[Any]], None] | None = None,
        seed: int = 0,
    ) -> None:
        self.teacher = teacher
        self.validator = validator
        self.make_env = make_env
        self.store = store
        self.workers = workers
        self.max_signals_per_kind = max_signals_per_kind
        self.max_admitted = max_admitted
        self.on_proposed = on_proposed
        self.seed = seed
        self._envs: list[AgentEnv] = []
        self._env_lock = threading.Lock()

    def _env(self) -> AgentEnv:
        with self._env_lock:
            return self._envs.pop() if self._envs else self.make_env()

    def _release(self, env: AgentEnv) -> None:
        with self._env_lock:
            self._envs.append(env)

    def run_round(
        self,
        round_id: int,
        step: int,
        signals: list[Signal],
        trajectories: dict[str, Trajectory],
        tasks: dict[str, Task],
        existing: set[str],
        *,
        unguided: bool = False,
    ) -> RoundResult:
        """Reflect on, explore from and abstract each signal; validate every candidate.

        ``unguided=True`` is the paper's random-exploration arm: each "signal" only names a
        pool task to start from (kind ``random``, no trajectory); the teacher explores it with
        a neutral context instead of a reflection on a signalled trajectory. Everything else
        (exploration budget, abstraction, validation, the admission cap) is the same, so the
        two arms differ only in where exploration starts and what guides it."""
        t0 = time.perf_counter()
        chosen = list(signals) if unguided else dedupe_signals(signals, default_cap=self.max_signals_per_kind)
        res = RoundResult(round=round_id, step=step, signals_in=len(signals), signals_used=len(chosen))
        for s in chosen:
            res.by_kind[s.kind] = res.by_kind.get(s.kind, 0) + 1
        seen = set(existing)
        lock = threading.Lock()
        stop = threading.Event()

        def handle(i: int, sig: Signal) -> None:
            # the ids of this signal's candidates and tasks come from a stream of its own,
            # whichever thread runs it, so a replayed round gives out the same ids (ids.py)
            with id_stream("round", self.seed, round_id, i, sig.kind, sig.task_id):
                handle_signal(i, sig)

        def handle_signal(i: int, sig: Signal) -> None:
            if stop.is_set():
                return
            task = tasks.get(sig.task_id)
            traj = None if unguided else (trajectories.get(sig.trajectory_id) or self.store.get_trajectory(sig.trajectory_id))
            if task is None or (traj is None and not unguided):
                with lock:
                    res.failures.append(f"signal {sig.id}: its task or trajectory is no longer available")
                return
            env = self._env()
            s0 = time.perf_counter()
            admitted_ids: list[str] = []
            try:
                with usage_meter() as meter:
                    try:
                        if traj is None:
                            ctx = ExplorationContext(signal_kind=sig.kind, summary="Unguided exploration of the environment.")
                        else:
                            ctx = self.teacher.reflect(sig, traj, task)
                        triplets = self.teacher.explore(env, task, ctx, seed=self.seed + 7919 * round_id + i)
                        with lock:
                            snapshot = set(seen)
                        cands = self.teacher.abstract(env, task, triplets, ctx, snapshot)
                    except BudgetExhausted:
                        stop.set()
                        with lock:
                            res.budget_exhausted = True
                        cands, triplets, ctx = [], [], None
                    except Exception as e:  # a teacher failure costs this signal, never the run
                        with lock:
                            res.failures.append(f"signal {sig.id}: teacher failed: {type(e).__name__}: {e}")
                        cands, triplets, ctx = [], [], None
                for c in cands:
                    c.signal_id, c.signal_kind, c.trajectory_id = sig.id, sig.kind, sig.trajectory_id or None
                    c.parent_task_id = c.parent_task_id or task.id
                    c.teacher = c.teacher or self.teacher.name
                    c.prompt_version = c.prompt_version or self.teacher.prompt_version
                    c.exploration = {
                        **c.exploration,
                        "context": ctx.model_dump() if ctx is not None else None,
                        "triplets": describe_triplets(triplets),
                        "triplet_count": len(triplets),
                    }
                if cands and self.on_proposed is not None:
                    self.on_proposed(step, cands)
                for c in cands:
                    with lock:
                        res.candidates += 1
                        snapshot = set(seen)
                    with usage_meter() as judge_usage:  # the teacher's judge may call its model
                        verdict, new_task = self.validator.validate(env, c, task, snapshot, judge=self.teacher.judge)
                    meter.add(judge_usage)
                    with lock:
                        if new_task is not None and c.fingerprint() in seen:
                            verdict = verdict.model_copy(update={"accepted": False, "reason": "duplicate of a task admitted earlier this round"})
                            new_task = None
                        if new_task is not None:
                            seen.add(c.fingerprint())
                            seen.add(new_task.fingerprint())
                    if new_task is not None:
                        new_task.lineage = Lineage(
                            parent_task_id=task.id,
                            signal_id=sig.id,
                            signal_kind=sig.kind,
                            trajectory_id=sig.trajectory_id or None,
                            teacher=c.teacher,
                            prompt_version=c.prompt_version,
                            step_admitted=step,
                            exploration=c.exploration,
                            validation={"reason": verdict.reason, "score": verdict.score, **verdict.evidence},
                        )
                        admitted_ids.append(new_task.id)
                        with lock:
                            res.accepted.append(new_task)
                    else:
                        with lock:
                            res.rejected += 1
                            key = verdict.reason.split(":")[0][:60]
                            res.rejection_reasons[key] = res.rejection_reasons.get(key, 0) + 1
                    self.store.record_verdict(step, round_id, c, verdict, new_task.id if new_task else None)
            finally:
                self._release(env)
            meter_usage = meter
            with lock:
                res.usage.add(meter_usage)
            self.store.record_usage(step, round_id, sig.id, admitted_ids, meter_usage, time.perf_counter() - s0)

        if self.workers <= 1 or len(chosen) <= 1:
            for i, s in enumerate(chosen):
                handle(i, s)
        else:
            with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="coevolve-evolve") as pool:
                for f in [pool.submit(handle, i, s) for i, s in enumerate(chosen)]:
                    f.result()
        # deterministic order whatever the thread timing was
        order = {s.id: i for i, s in enumerate(chosen)}
        res.accepted.sort(key=lambda t: order.get(t.lineage.signal_id if t.lineage else "", 0))
        # then take turns, so that an admission cap keeps a share of every kind and of every signal:
        # each signal's first task before any signal's second, and within that the kinds in turn
        kinds = list(dict.fromkeys(s.kind for s in chosen))
        rank_in_kind: dict[str, int] = {}
        seen_kind: dict[str, int] = {}
        for s in chosen:
            rank_in_kind[s.id] = seen_kind.get(s.kind, 0)
            seen_kind[s.kind] = rank_in_kind[s.id] + 1
        kind_of = {s.id: s.kind for s in chosen}
        nth: dict[str, int] = {}
        turns: dict[str, tuple[int, int, int]] = {}
        for t in res.accepted:
            sid = t.lineage.signal_id if t.lineage else ""
            nth[sid] = nth.get(sid, -1) + 1
            turns[t.id] = (nth[sid], rank_in_kind.get(sid, 0), kinds.index(kind_of[sid]) if sid in kind_of else 0)
        res.accepted.sort(key=lambda t: turns[t.id])
        if self.max_admitted is not None and len(res.accepted) > self.max_admitted:
            over = res.accepted[self.max_admitted :]
            res.accepted = res.accepted[: self.max_admitted]
            res.over_budget = len(over)
        res.seconds = time.perf_counter() - t0
        # the validated tasks themselves too: if the run stops before the loop admits them,
        # a resumed run admits them from here instead of paying the teacher again
        self.store.record_round(round_id, step, {**res.summary(), "accepted_tasks": [t.model_dump(mode="json") for t in res.accepted]})
        return res

    def seed_pool(self, bases: list[Task], n: int, existing: set[str], step: int = 0) -> tuple[list[Task], dict[str, Any]]:
        """D_0 by unguided exploration: explore from the environment's train tasks, validate,
        and return the proven tasks (origin ``seed``, with lineage)."""
        env = self._env()
        accepted: list[Task] = []
        rejected: dict[str, int] = {}
        seen = set(existing)
        try:
            with usage_meter() as meter:
                cands = self.teacher.seed_tasks(env, bases, n * 2, seen, seed=self.seed)
            for c in cands:
                if len(accepted) >= n:
                    break
                c.teacher = c.teacher or self.teacher.name
                c.prompt_version = c.prompt_version or self.teacher.prompt_version
                with usage_meter() as judge_usage:
                    verdict, task = self.validator.validate(env, c, next((b for b in bases if b.id == c.parent_task_id), None), seen,
                                                            judge=self.teacher.judge)
                meter.add(judge_usage)
                if task is not None:
                    task.origin = "seed"
                    task.lineage = Lineage(
                        parent_task_id=c.parent_task_id, signal_kind="seed", teacher=c.teacher,
                        prompt_version=c.prompt_version, step_admitted=step, exploration=c.exploration,
                        validation={"reason": verdict.reason, "score": verdict.score, **verdict.evidence},
                    )
                    seen.add(task.fingerprint())
                    accepted.append(task)
                else:
                    key = verdict.reason.split(":")[0][:60]
                    rejected[key] = rejected.get(key, 0) + 1
                self.store.record_verdict(step, None, c, verdict, task.id if task else None)
        finally:
            self._release(env)
        self.store.record_usage(step, None, None, [t.id for t in accepted], meter)
        return accepted, {"candidates": len(cands), "accepted": len(accepted), "rejected": rejected}

