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

import numpy as np

from coevolve_sdk.storage.diskspace import disk_full_cause
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.errors import BudgetExhausted
from coevolve_sdk.ids import id_stream
from coevolve_sdk.evolution.signals import dedupe_signals
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.teacher import Teacher, describe_triplets, usage_meter
from coevolve_sdk.records import (
    CandidateTask, ExplorationContext, Lineage, Signal, Task, TeacherStages, TeacherUsage, Trajectory, Verdict,
)
from coevolve_sdk.evolution.validation import Validator

__all__ = ["Evolver", "PROBE_COUNTS", "Probe", "RoundResult", "signal_seed"]

#: what a round records of evolution.admission_probe (RoundResult fields of the same names)
PROBE_COUNTS = ("probed", "probe_rollouts", "too_easy", "too_hard")


def signal_seed(run_seed: int, round_id: int, index: int) -> int:
    """The seed of one signal's exploration: a stream of its own per (run seed, round, signal
    index), so that signals explored in any order, on any thread, draw what they would alone."""
    return int(np.random.SeedSequence([run_seed, round_id, index, 0xE7]).generate_state(1)[0] & 0x7FFF_FFFF)


@dataclass
class Probe:
    """How a round has the current agent try its validated tasks (evolution.admission_probe):
    ``tries(tasks, step, seed)`` gives, per task, how many of ``rollouts`` sampled episodes
    succeeded. The loop builds it from its policy; the evolver only counts."""

    rollouts: int
    tries: Callable[[list[Task], int, int], list[int]]


def rejection_key(verdict: Verdict) -> str:
    """The reason a candidate was rejected, as counted per round (the text before any detail)."""
    return verdict.reason.split(":")[0][:60]


@dataclass
class _SignalWork:
    """What one signal produced (explored and validated against the pool), before the round
    settles it in signal order."""

    signal: Signal
    checked: list[tuple[CandidateTask, Verdict, Task | None]] = field(default_factory=list)
    failure: str | None = None
    budget_exhausted: bool = False
    usage: TeacherUsage | None = None
    seconds: float = 0.0


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
    #: signals (random arm: exploration starts) explored, of those chosen
    starts_explored: int = 0
    #: random arm with an admission cap: whether its validated tasks reached the cap, and if not why
    admission_cap_reached: bool | None = None
    short_of_cap: str | None = None
    #: evolution.admission_probe: validated tasks the current agent tried, the tries, and those left
    #: out because it solved them in every try (too easy) or in none (too hard)
    probed: int = 0
    probe_rollouts: int = 0
    too_easy: int = 0
    too_hard: int = 0
    seconds: float = 0.0
    usage: TeacherUsage = field(default_factory=TeacherUsage)
    #: what the teacher's model replies did so far in the run (Teacher.stages()), None for a teacher without a model
    teacher_stages: TeacherStages | None = None

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
            "starts_explored": self.starts_explored,
            "admission_cap_reached": self.admission_cap_reached,
            "short_of_cap": self.short_of_cap,
            **{key: getattr(self, key) for key in PROBE_COUNTS},
            "seconds": self.seconds,
            "usage": self.usage.model_dump(),
            "teacher_stages": self.teacher_stages.model_dump() if self.teacher_stages is not None else None,
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
        probe: Probe | None = None,
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
        self.probe = probe
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
        batch: int | None = None,
    ) -> RoundResult:
        """Reflect on, explore from and abstract each signal; validate every candidate.

        ``unguided=True`` is the paper's random-exploration arm: each "signal" only names a
        pool task to start from (kind ``random``, no trajectory); the teacher explores it with
        a neutral context instead of a reflection on a signalled trajectory. Everything else
        (exploration budget, abstraction, validation, the admission cap) is the same, so the
        two arms differ only in where exploration starts and what guides it. With ``batch``,
        the starts are explored ``batch`` at a time and the round stops after the first batch
        that brings its validated tasks to the admission cap (``max_admitted``): the random arm
        explores further when its first starts admit fewer tasks than the guided arm may, up
        to the starts it was given, and the record says whether it reached the cap.

        The result depends on the run seed, the round and the inputs only, never on
        ``workers`` or thread timing: each signal explores with an RNG stream of its own
        (run seed, round, signal index) on an environment reset from that stream, validation
        checks each candidate against the pool only, and the round's own duplicates are then
        settled in signal order (the first signal's task wins), not in completion order."""
        t0 = time.perf_counter()
        chosen = list(signals) if unguided else dedupe_signals(signals, default_cap=self.max_signals_per_kind)
        res = RoundResult(round=round_id, step=step, signals_in=len(signals))
        seen = set(existing)
        stop = threading.Event()

        def partners_of(i: int, own: str) -> list[Task]:
            """The round's other start tasks, in signal order, each once: what a composing
            teacher may join to start ``i`` (the same list whatever thread explores it)."""
            out: dict[str, Task] = {}
            for j, s in enumerate(chosen):
                t = tasks.get(s.task_id)
                if j != i and t is not None and t.id != own:
                    out.setdefault(t.id, t)
            return list(out.values())

        def handle(i: int, sig: Signal) -> _SignalWork | None:
            # the ids of this signal's candidates and tasks come from a stream of its own,
            # whichever thread runs it, so a replayed round gives out the same ids (ids.py)
            with id_stream("round", self.seed, round_id, i, sig.kind, sig.task_id):
                return explore_and_validate(i, sig)

        def explore_and_validate(i: int, sig: Signal) -> _SignalWork | None:
            if stop.is_set():
                return None
            work = _SignalWork(signal=sig)
            task = tasks.get(sig.task_id)
            traj = None if unguided else (trajectories.get(sig.trajectory_id) or self.store.get_trajectory(sig.trajectory_id))
            if task is None or (traj is None and not unguided):
                work.failure = f"signal {sig.id}: its task or trajectory is no longer available"
                return work
            env = self._env()
            s0 = time.perf_counter()
            seed = signal_seed(self.seed, round_id, i)
            try:
                with usage_meter() as meter:
                    try:
                        env.reset(seed=seed, options={"task": task})  # the env's RNG from this signal's stream, whoever used it before
                        if traj is None:
                            ctx = ExplorationContext(signal_kind=sig.kind, summary="Unguided exploration of the environment.")
                        else:
                            ctx = self.teacher.reflect(sig, traj, task)
                        if self.teacher.wants_partners:
                            ctx.partners = partners_of(i, task.id)
                        triplets = self.teacher.explore(env, task, ctx, seed=seed)
                        cands = self.teacher.abstract(env, task, triplets, ctx, set(existing))
                    except BudgetExhausted:
                        stop.set()
                        work.budget_exhausted = True
                        cands, triplets, ctx = [], [], None
                    except Exception as e:  # a teacher failure costs this signal, never the run
                        if disk_full_cause(e) is not None:  # not the teacher's fault: the run stops, a resume replays the round
                            raise
                        work.failure = f"signal {sig.id}: teacher failed: {type(e).__name__}: {e}"
                        cands, triplets, ctx = [], [], None
                for c in cands:
                    self._stamp(c)
                    c.signal_id, c.signal_kind, c.trajectory_id = sig.id, sig.kind, sig.trajectory_id or None
                    c.parent_task_id = c.parent_task_id or task.id
                    c.exploration = {
                        **c.exploration,
                        "context": ctx.model_dump() if ctx is not None else None,
                        "triplets": describe_triplets(triplets),
                        "triplet_count": len(triplets),
                    }
                for c in cands:
                    verdict, new_task = self._validate(env, c, task, existing, meter, step, sig)
                    work.checked.append((c, verdict, new_task))
                work.usage = meter
            finally:
                self._release(env)
            work.seconds = time.perf_counter() - s0
            return work

        def settle(work: _SignalWork | None) -> None:
            """One signal's outcome into the round, in signal order (the main thread only)."""
            if work is None:
                return
            res.signals_used += 1
            res.by_kind[work.signal.kind] = res.by_kind.get(work.signal.kind, 0) + 1
            if work.failure:
                res.failures.append(work.failure)
            res.budget_exhausted |= work.budget_exhausted
            cands = [c for c, _, _ in work.checked]
            if cands and self.on_proposed is not None:
                self.on_proposed(step, cands)
            admitted_ids: list[str] = []
            for c, verdict, new_task in work.checked:
                res.candidates += 1
                if new_task is not None and (c.fingerprint() in seen or new_task.fingerprint() in seen):
                    verdict = verdict.model_copy(update={"accepted": False, "reason": "duplicate of a task admitted earlier this round"})
                    new_task = None
                if new_task is not None:
                    seen.update((c.fingerprint(), new_task.fingerprint()))
                    admitted_ids.append(new_task.id)
                    res.accepted.append(new_task)
                else:
                    res.rejected += 1
                    key = rejection_key(verdict)
                    res.rejection_reasons[key] = res.rejection_reasons.get(key, 0) + 1
                self.store.record_verdict(step, round_id, c, verdict, new_task.id if new_task else None)
            if work.usage is None:
                return  # the teacher never ran for it: no usage to record
            res.usage.add(work.usage)
            self.store.record_usage(step, round_id, work.signal.id, admitted_ids, work.usage, work.seconds)

        size = batch if (unguided and batch and self.max_admitted is not None) else max(len(chosen), 1)
        batches = [list(range(k, min(k + size, len(chosen)))) for k in range(0, len(chosen), size)]
        for b, indices in enumerate(batches):
            if self.workers <= 1 or len(indices) <= 1:
                works = [handle(i, chosen[i]) for i in indices]
            else:
                with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="coevolve-evolve") as pool:
                    works = [f.result() for f in [pool.submit(handle, i, chosen[i]) for i in indices]]
            before = len(res.accepted)
            for w in works:
                settle(w)
            if self.probe is not None:
                self._keep_learnable(res, before, round_id, step, b)
            res.starts_explored = indices[-1] + 1
            if self.max_admitted is not None and len(res.accepted) >= self.max_admitted:
                break
        if unguided and self.max_admitted is not None:
            res.admission_cap_reached = len(res.accepted) >= self.max_admitted
            if not res.admission_cap_reached:
                res.short_of_cap = (f"{len(res.accepted)} of {self.max_admitted} tasks validated"
                                    f"{' and passed by the probe' if self.probe is not None else ''} after exploring all "
                                    f"{len(chosen)} starts the round may draw (evolution.random_max_starts)"
                                    if not res.budget_exhausted else "the teacher's budget ran out")
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
        try:
            res.teacher_stages = self.teacher.stages()
        except Exception as e:  # a record that cannot be taken is said, and costs the round nothing
            res.failures.append(f"stages: {type(e).__name__}: {e}")
        res.seconds = time.perf_counter() - t0
        # the validated tasks themselves too: if the run stops before the loop admits them,
        # a resumed run admits them from here instead of paying the teacher again
        self.store.record_round(round_id, step, {**res.summary(), "accepted_tasks": [t.model_dump(mode="json") for t in res.accepted]})
        return res

    def _keep_learnable(self, res: RoundResult, start: int, round_id: int, step: int, batch: int) -> None:
        """evolution.admission_probe: the agent as it is now tries each task validated in this
        batch; a task it solved in every try or in none leaves the round (its GRPO group would
        have equal rewards: no gradient). The tries run here, in the round's thread, which in
        sync mode is the loop's: the agent does not change meanwhile. They follow the run seed,
        the round and the batch, so a replayed round tries the same way."""
        assert self.probe is not None
        fresh = res.accepted[start:]
        if not fresh:
            return
        wins = self.probe.tries(fresh, step, int(np.random.SeedSequence([self.seed, round_id, batch, 0x9B0]).generate_state(1)[0] & 0x7FFF_FFFF))
        n = self.probe.rollouts
        res.probed += len(fresh)
        res.probe_rollouts += n * len(fresh)
        kept: list[Task] = []
        for task, k in zip(fresh, wins):
            if 0 < k < n:
                if task.lineage is not None:
                    task.lineage.validation = {**task.lineage.validation, "probe_successes": k, "probe_tries": n}
                kept.append(task)
                continue
            key = "probe: the agent solved it in every try" if k >= n else "probe: the agent solved it in no try"
            if k >= n:
                res.too_easy += 1
            else:
                res.too_hard += 1
            res.rejected += 1
            res.rejection_reasons[key] = res.rejection_reasons.get(key, 0) + 1
        res.accepted[start:] = kept

    def _stamp(self, c: CandidateTask) -> None:
        """Who proposed ``c``, unless the teacher said so itself."""
        c.teacher = c.teacher or self.teacher.name
        c.prompt_version = c.prompt_version or self.teacher.prompt_version

    def _validate(self, env: AgentEnv, c: CandidateTask, base: Task | None, existing: set[str], meter: Any, step: int,
                  signal: Signal | None) -> tuple[Verdict, Task | None]:
        """Validate ``c`` by execution (the judge's calls counted into ``meter``, with the
        teacher's own) and give an admitted task its lineage: the signal it came from (none for
        the seed pool), the teacher, the exploration and the verdict's evidence."""
        with usage_meter() as judge_usage:  # the teacher's judge may call its model
            verdict, task = self.validator.validate(env, c, base, existing, judge=self.teacher.judge)
        meter.add(judge_usage)
        if task is not None:
            task.lineage = Lineage(
                parent_task_id=base.id if base is not None else c.parent_task_id,
                signal_id=signal.id if signal else None,
                signal_kind=signal.kind if signal else "seed",
                trajectory_id=(signal.trajectory_id or None) if signal else None,
                teacher=c.teacher, prompt_version=c.prompt_version, step_admitted=step, exploration=c.exploration,
                validation={"reason": verdict.reason, "score": verdict.score, **verdict.evidence},
            )
        return verdict, task

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
                self._stamp(c)
                base = next((b for b in bases if b.id == c.parent_task_id), None)
                verdict, task = self._validate(env, c, base, seen, meter, step, None)
                if task is not None:
                    task.origin = "seed"
                    seen.add(task.fingerprint())
                    accepted.append(task)
                else:
                    key = rejection_key(verdict)
                    rejected[key] = rejected.get(key, 0) + 1
                self.store.record_verdict(step, None, c, verdict, task.id if task else None)
        finally:
            self._release(env)
        self.store.record_usage(step, None, None, [t.id for t in accepted], meter)
        return accepted, {"candidates": len(cands), "accepted": len(accepted), "rejected": rejected}

