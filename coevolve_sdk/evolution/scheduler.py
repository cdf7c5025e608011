"""When evolution rounds run and when their tasks join the pool: the evolution scheduler.

The loop hands every step's signals to ``offer`` and asks ``poll`` at the step's boundaries for
the tasks that are due. The scheduler decides, from step numbers alone, when a round starts
and when it is admitted, so a run admits the same tasks at the same steps whatever the
teacher's speed, and a resumed run does exactly what an uninterrupted one did:

* a round is due at every step ``s`` with ``s % evolution.every == 0``; it consumes every
  signal no round has consumed yet (the store records which round took which signal in
  ``signals.round``: the store, not the checkpoint, is the truth about consumption);
* ``mode: sync``: the round runs at once and its tasks are admitted at step ``s``;
* ``mode: async``: the round runs in a background thread and its tasks are admitted at the
  boundary before step ``s + async_lag + 1`` samples its tasks, waiting for the round if it is
  not done by then. A round due while the previous one is still waiting for admission is
  skipped (its signals wait for the next round); at the last step every round still running
  is waited for and admitted before the final checkpoint;
* a round due with no signal is skipped, loudly, with the likely reason;
* a round whose tasks would join the pool after the last training step samples (sync: a round
  at the last step; async: one admitted after it) is not started: nothing would train on its
  tasks, and an arm's count of admitted tasks would include tasks no step saw.

Resume (``recover``): rounds the checkpoint recorded as running are finished from the store
(their validated tasks, when the round completed before the stop) or run again from the
signals the store says they consumed. A round rolled back with the steps after a checkpoint
is reused, instead of paying the teacher again, when the replay starts it with identical
inputs (same signals by content, same pool).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import coevolve_sdk.kill_points as killpoints
from coevolve_sdk.config import EvolutionConfig, RunConfig
from coevolve_sdk.storage.diskspace import disk_full_cause
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.evolution.rounds import PROBE_COUNTS, Evolver, Probe, RoundResult
from coevolve_sdk.training.policy import Policy
from coevolve_sdk.training.rollout import EnvPool, tried_successes
from coevolve_sdk.ids import id_stream
from coevolve_sdk.evolution.pool import TaskPool
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.teacher import Teacher
from coevolve_sdk.records import RolloutGroup, Signal, Task, TeacherStages, Trajectory
from coevolve_sdk.evolution.validation import Validator, evaluation_requests

__all__ = ["EvolutionScheduler", "Admission", "held_out_requests"]


def held_out_requests(cfg: RunConfig, make_env: Callable[[], AgentEnv], log: Callable[[str], None]) -> dict[str, str]:
    """The normalised requests of the run's evaluation split (all its tasks, not only the
    ``eval.max_tasks`` evaluated), which no admitted task may repeat (validation.py). A run that
    evaluates needs the split anyway, so a missing one is an error here; a run that never
    evaluates only says that its tasks are not checked against it."""
    evaluates = cfg.eval.initial or cfg.eval.before or cfg.eval.after or cfg.eval.every is not None
    env = make_env()
    try:
        return evaluation_requests(env, [cfg.eval.split])
    except Exception as e:
        if evaluates:
            raise
        log(f"WARNING: the evaluation split '{cfg.eval.split}' could not be read ({type(e).__name__}: {e}): admitted tasks are "
            f"not checked against its requests")
        return {}
    finally:
        env.close()


@dataclass
class _Round:
    round: int
    step: int
    admit_at: int
    future: Future[RoundResult] = field(default_factory=Future)


@dataclass
class Admission:
    """A round whose tasks joined the pool at this boundary."""

    result: RoundResult
    admitted: list[Task]
    waited: float


def _result_from_record(rec: dict[str, Any]) -> RoundResult:
    """A round's result as the store keeps it (the tasks it validated included)."""
    res = RoundResult(round=int(rec["round"]), step=int(rec["step"]))
    for key in ("signals_in", "signals_used", "candidates", "rejected", "over_budget", "starts_explored", *PROBE_COUNTS):
        setattr(res, key, int(rec.get(key, 0)))
    res.admission_cap_reached = rec.get("admission_cap_reached")
    res.short_of_cap = rec.get("short_of_cap")
    res.by_kind = dict(rec.get("by_kind", {}))
    res.rejection_reasons = dict(rec.get("rejection_reasons", {}))
    res.failures = list(rec.get("failures", []))
    res.budget_exhausted = bool(rec.get("budget_exhausted", False))
    res.seconds = float(rec.get("seconds", 0.0))
    res.accepted = [Task.model_validate(t) for t in rec.get("accepted_tasks", [])]
    res.teacher_stages = TeacherStages.model_validate(rec["teacher_stages"]) if rec.get("teacher_stages") else None
    return res


class EvolutionScheduler:
    def __init__(
        self,
        evolver: Evolver,
        store: RunStore,
        pool: TaskPool,
        options: EvolutionConfig,
        *,
        seed: int,
        detector_kinds: list[str],
        log: Callable[[str], None],
        on_admitted: Callable[[int, list[Task]], None],
        last_step: int | None = None,
        silent_hints: list[str] | None = None,
    ) -> None:
        self.evolver = evolver
        self.last_step = last_step  # training.steps: no round whose tasks no step would sample
        self.store = store
        self.pool = pool
        self.settings = options  # the run's evolution section (evolution.* in the config)
        self.seed = seed
        self.detector_kinds = detector_kinds
        self.silent_hints = [h for h in (silent_hints or []) if h]  # each detector's "what I need to fire"
        self.log = log
        self.on_admitted = on_admitted
        self.round = 0  # the last round started
        self._running: list[_Round] = []
        self._cache: dict[str, Trajectory] = {}

    @classmethod
    def for_run(cls, cfg: RunConfig, teacher: Teacher, make_env: Callable[[], AgentEnv], store: RunStore, pool: TaskPool,
                detector_kinds: list[str], *, silent_hints: list[str] | None = None, log: Callable[[str], None], on_admitted: Callable[[int, list[Task]], None],
                on_proposed: Callable[[int, list[Any]], None], agent: tuple[Policy, EnvPool] | None = None) -> "EvolutionScheduler":
        """The scheduler of a run, with its evolver (teacher, validator, workers) built from the config;
        ``agent`` (the run's policy and environments) tries validated tasks for evolution.admission_probe."""
        evo = cfg.evolution
        probe = None
        if evo.admission_probe and agent is not None:
            policy, envs = agent
            probe = Probe(evo.admission_probe, lambda tasks, step, seed: tried_successes(
                policy, envs, tasks, cfg.rollout, evo.admission_probe, step, seed))
        validator = Validator(cfg.validation, held_out=held_out_requests(cfg, make_env, log))
        evolver = Evolver(teacher, validator, make_env, store, workers=evo.workers,
                          max_signals_per_kind=evo.max_signals_per_kind, max_admitted=evo.max_admitted_per_round,
                          on_proposed=on_proposed, seed=cfg.seed, probe=probe)
        return cls(evolver, store, pool, evo, seed=cfg.seed, detector_kinds=detector_kinds, log=log, on_admitted=on_admitted,
                   last_step=cfg.training.steps, silent_hints=silent_hints)

    # ------------------------------------------------------------------ checkpoint state
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must know: the last round's number and the rounds not yet admitted."""
        return {"round": self.round, "running": [{"round": r.round, "step": r.step, "admit_at": r.admit_at} for r in self._running]}

    def recover_checkpoint(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's ``state.json`` (the store rolled back to it)."""
        if "evolution" in state:
            self.recover(state["evolution"])
        else:  # written by coevolve-sdk up to fa4cf36
            self.recover_legacy(state, int(state["step"]))

    def recover(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's ``state_dict`` (after the store was rolled back to it)."""
        self.round = int(state.get("round", 0))
        for rec in state.get("running", []):
            r, step = int(rec["round"]), int(rec["step"])
            slot = _Round(r, step, int(rec["admit_at"]))
            done = self.store.round_result(r)
            if done is not None and "accepted_tasks" in done:
                slot.future.set_result(_result_from_record(done))
                self.log(f"round {r} had finished before the stop: its {len(done['accepted_tasks'])} validated tasks "
                         f"join the pool at step {slot.admit_at}")
            else:
                signals, trajs, unguided = self._inputs(r, step)
                self.log(f"round {r} was cut short by the stop: it runs again from its {len(signals)} signals")
                self._launch(slot, signals, trajs, unguided)
            self._running.append(slot)

    def recover_legacy(self, state: dict[str, Any], step: int) -> None:
        """A checkpoint written before the store tracked consumption (coevolve-sdk up to
        fa4cf36): the checkpoint listed the pending signals and the round in flight."""
        pending = {s["id"] for s in state.get("pending_signals", [])}
        flight = state.get("in_flight_round") or None
        in_flight = {s["id"] for s in flight["signals"]} if flight else set()
        rounds = sorted((rd["round"], rd["step"]) for rd in self.store.rounds() if rd["round"] <= int(state.get("round", 0)))
        by_round: dict[int | None, list[str]] = {}
        for sig in self.store.pending_signals():
            if sig.id in pending:
                continue
            if sig.id in in_flight:
                by_round.setdefault(flight["round"], []).append(sig.id)  # type: ignore[index]
                continue
            later = [r for r, s in rounds if s >= sig.step]
            by_round.setdefault(later[0] if later else 0, []).append(sig.id)
        for r, ids in by_round.items():
            self.store.assign_signals(r, ids)
        new_state: dict[str, Any] = {"round": int(state.get("round", 0)), "running": []}
        if flight:
            admit_at = max(step + 1, int(flight["step"]) + self.settings.async_lag + 1)
            new_state["running"].append({"round": flight["round"], "step": flight["step"], "admit_at": admit_at})
        self.recover(new_state)

    # ------------------------------------------------------------------ the loop's calls
    def offer(self, signals: list[Signal], groups: list[RolloutGroup], step: int) -> None:
        """This step's signals (already recorded in the store); starts a round when one is due."""
        if not self.settings.enabled:
            return
        wanted = {tid for s in signals for tid in (s.trajectory_id, *s.trajectory_ids)}
        for g in groups:
            for tr in g.trajectories:
                if tr.id in wanted:
                    self._cache[tr.id] = tr.without_tokens()
        if step % self.settings.every != 0:
            return
        first_sampled = step + 1 if self.settings.mode == "sync" else step + self.settings.async_lag + 1
        if self.last_step is not None and first_sampled > self.last_step:
            text = (f"evolution round not started at step {step}: its tasks would join the pool after the last training step "
                    f"({self.last_step}), so nothing would train on them")
            self.log(text)
            return
        if self._running:
            self.log(f"step {step}: evolution round skipped: round {self._running[0].round} is still waiting for admission "
                     f"(evolution.async_lag {self.settings.async_lag} >= evolution.every {self.settings.every}); its signals wait")
            return
        unguided = self.settings.guidance == "random"
        pending = self.store.pending_signals()
        if not pending and not unguided:
            self._warn_no_signals(step, groups)
            return
        self.round += 1
        r = self.round
        if not unguided:
            pending = self._ordered(pending, step)
        signals_in, trajs = (self._random_starts(r, step) if unguided else (pending, self._trajectories(pending)))
        digest = self._digest(r, step, signals_in, trajs, unguided)
        self.store.start_round(r, step, digest, unguided, [s.id for s in pending])
        killpoints.reached("round_started")
        slot = _Round(r, step, step if self.settings.mode == "sync" else step + self.settings.async_lag + 1)
        reused = self.store.reusable_round(r, digest)
        if reused is not None:
            self.store.reuse_round(reused["attempt"])
            slot.future.set_result(_result_from_record(reused))
            self.log(f"round {r}: its inputs are those of a rolled-back attempt; that attempt's result is reused "
                     f"(the teacher is not paid again)")
        else:
            self._launch(slot, signals_in, trajs, unguided, background=self.settings.mode == "async")
        self._running.append(slot)
        self._cache.clear()

    def poll(self, step: int, final: bool = False) -> list[Admission]:
        """Admit the rounds due at this boundary (every round still running when ``final``)."""
        out = []
        for slot in [r for r in self._running if final or r.admit_at <= step]:
            t0 = time.perf_counter()
            try:
                result = slot.future.result()
            except Exception as e:  # a teacher failure is caught per signal; this is a bug in the round
                if disk_full_cause(e) is not None:  # not the round's fault: the run stops, a resume replays the round
                    raise
                self.log(f"evolution round {slot.round} failed: {type(e).__name__}: {e}; no task admitted")
                result = RoundResult(round=slot.round, step=slot.step)
            waited = time.perf_counter() - t0
            self._running.remove(slot)
            # lineage records the step the task joined the pool (a background round's is later
            # than the step it started at)
            accepted = [t.model_copy(update={"lineage": t.lineage.model_copy(update={"step_admitted": step})}) if t.lineage else t
                        for t in result.accepted]
            admitted = self.pool.admit(accepted, step=step)
            killpoints.reached("after_admission")
            self._report(result, admitted, step)
            if admitted:
                self.on_admitted(step, admitted)
            out.append(Admission(result, admitted, waited))
        return out

    # ------------------------------------------------------------------ helpers
    def _launch(self, slot: _Round, signals: list[Signal], trajs: dict[str, Trajectory], unguided: bool, background: bool = True) -> None:
        tasks = {t.id: t for t in self.pool.tasks}
        args = (slot.round, slot.step, signals, trajs, tasks, self.pool.fingerprints)

        def work() -> None:
            try:
                slot.future.set_result(self.evolver.run_round(*args, unguided=unguided,
                                                              batch=self._random_batch() if unguided else None))
            except BaseException as e:  # noqa: BLE001 - handed to the admitting thread
                slot.future.set_exception(e)

        if background:
            if self.settings.mode == "async":
                self.log(f"round {slot.round}: evolving {len(signals)} signals in the background (admitted at step {slot.admit_at})")
            # a daemon thread: a stopped run exits without waiting for the teacher
            threading.Thread(target=work, name=f"coevolve-round-{slot.round}", daemon=True).start()
        else:
            work()

    def _inputs(self, r: int, step: int) -> tuple[list[Signal], dict[str, Trajectory], bool]:
        start = self.store.round_start(r)
        unguided = bool(start["unguided"]) if start else self.settings.guidance == "random"
        if unguided:
            return (*self._random_starts(r, step), True)
        signals = self._ordered(self.store.round_signals(r), step)
        return signals, self._trajectories(signals), False

    def _ordered(self, signals: list[Signal], step: int) -> list[Signal]:
        """A guided round's signals in the order the teacher takes them (evolution.signal_order).
        The one-per-task fold and the per-kind cap keep the first ones, so with ``weakest`` the
        signals of the tasks the agent solved least often in its training rollouts since the
        oldest of them come first; a stable sort keeps arrival order among equals. It reads only
        rows of steps up to ``step``, so a round run again after a stop sees the same order."""
        if self.settings.signal_order == "arrival" or not signals:
            return signals
        rates = self.store.training_success(min(s.step for s in signals), step)

        def solved(s: Signal) -> float:
            wins, tries = rates.get(s.task_id, (0, 0))
            return wins / tries if tries else 1.0  # no rollout to judge by: after every judged task

        return sorted(signals, key=solved)

    def _trajectories(self, signals: list[Signal]) -> dict[str, Trajectory]:
        out: dict[str, Trajectory] = {}
        for s in signals:
            for tid in (s.trajectory_id, *s.trajectory_ids):
                tr = self._cache.get(tid) or self.store.get_trajectory(tid)
                if tr is not None:
                    out[tid] = tr
        return out

    def _random_batch(self) -> int:
        """Starts a random-exploration round explores at first (and per further batch)."""
        # what the run's detectors could hand a guided round at most
        return self.settings.random_starts or max(1, len(self.detector_kinds)) * (self.settings.max_signals_per_kind or 16)

    def _random_starts(self, r: int, step: int) -> tuple[list[Signal], dict[str, Trajectory]]:
        """The random-exploration arm: pool tasks drawn at random (an RNG of its own, so the
        training sample stream is the one every arm sees) instead of signals. With an admission
        cap, more than a batch are drawn (``random_max_starts``): the round explores them a
        batch at a time until it has validated as many tasks as the cap (evolution.py)."""
        pool_tasks = self.pool.tasks
        n = self._random_batch()
        if self.settings.max_admitted_per_round is not None:
            n = max(n, self.settings.random_max_starts or 4 * n)
        rng = np.random.default_rng([self.seed, 104_729, r])
        idx = rng.choice(len(pool_tasks), size=min(n, len(pool_tasks)), replace=False)
        with id_stream("random-starts", self.seed, r):
            signals = [Signal(kind="random", task_id=pool_tasks[int(i)].id, trajectory_id="", step=step,
                              reason="unguided exploration from a pool task drawn at random") for i in idx]
        return signals, {}

    def _digest(self, r: int, step: int, signals: list[Signal], trajs: dict[str, Trajectory], unguided: bool) -> str:
        """The round's inputs by content: signals (not their ids), the trajectories they point
        to, and the pool they explore from."""
        def traj(tid: str) -> Any:
            tr = trajs.get(tid)
            return None if tr is None else [tr.task_id, tr.score, tr.actions]

        body = {
            "round": r, "step": step, "unguided": unguided,
            "signals": [[s.kind, s.task_id, s.step, s.reason, s.evidence, traj(s.trajectory_id), [traj(t) for t in s.trajectory_ids]]
                        for s in signals],
            "pool": sorted(self.pool.fingerprints),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()

    def _report(self, result: RoundResult, admitted: list[Task], step: int) -> None:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.by_kind.items())) or "none"
        extra = " (budget exhausted)" if result.budget_exhausted else ""
        if result.over_budget:
            extra += f" ({result.over_budget} validated tasks over the round's admission cap left out)"
        if result.probed:
            extra += (f" (the agent tried {result.probed} validated tasks {result.probe_rollouts // result.probed} times each: "
                      f"{result.too_easy} always solved, {result.too_hard} never solved, left out)")
        if result.short_of_cap:
            extra += f" (short of the admission cap: {result.short_of_cap})"
        self.log(f"round {result.round} (step {result.step}): signals {kinds}; {result.candidates} proposed, "
                 f"{len(admitted)} admitted, {result.rejected} rejected{extra}; pool {len(self.pool)}")

    def _warn_no_signals(self, step: int, groups: list[RolloutGroup]) -> None:
        """A due round without signals: say so loudly, with the likely reason (the report
        shows it too, from the store's notes)."""
        since = max((rd["step"] for rd in self.store.rounds()), default=0)
        mixed = sum(1 for g in groups if len({t.success for t in g.trajectories}) > 1)
        all_ok = sum(1 for g in groups if g.trajectories and all(t.success for t in g.trajectories))
        all_bad = len(groups) - mixed - all_ok
        reasons = []
        if not self.detector_kinds:
            reasons.append("the run has no detectors (detectors: [] in the config)")
        else:
            reasons.append(f"detectors {', '.join(self.detector_kinds)} found nothing since step {since}")
            reasons.append(f"in step {step} {mixed} rollout groups mixed success and failure, {all_ok} were all solved and "
                           f"{all_bad} all failed")
            reasons.extend(self.silent_hints)
        text = f"evolution round skipped at step {step}: no signals. Likely: " + "; ".join(reasons) + "."
        self.log("WARNING: " + text)
        self.store.add_note(step, "evolution_skipped", text)
