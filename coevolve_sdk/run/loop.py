"""CoEvolveLoop: the closed loop of the paper, top to bottom (docs/architecture.md).

    D_0 ← unguided exploration (validated)              build_seed_pool
    optional warm start on D_0's reference actions      algorithm.warm_start
    for t = 1..T:
        D_t ← D_t ∪ tasks of the rounds due now          evolution.poll
        X ← sample(D_t)                                  pool.sample
        groups ← K rollouts of every x ∈ X               collect_groups
        θ ← GRPO step on groups                          algorithm.step
        S ← S ∪ detectors(groups, history)               _detect
        if t mod F = 0: round on S → validated tasks     evolution.offer (admission_probe: the agent tries them)
        checkpoint                                       _checkpoint

The checkpoint is the truth: on resume whatever was written after it is rolled back and those
steps are replayed, so a killed run ends where an uninterrupted one does (docs/run-folder.md).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

import coevolve_sdk.kill_points as killpoints
from coevolve_sdk.components.blame import blame
from coevolve_sdk.components.context import RunContext
from coevolve_sdk.components.registry import Registry, get_registry
from coevolve_sdk.config import RunConfig, validate_components
from coevolve_sdk.config.plugins import load_run_plugins
from coevolve_sdk.errors import ResumeError
from coevolve_sdk.evolution.judge import judge_step
from coevolve_sdk.evolution.pool import TaskPool, attach_sampler
from coevolve_sdk.evolution.scheduler import EvolutionScheduler
from coevolve_sdk.evolution.seed_pool import build_seed_pool, warm_start_tasks
from coevolve_sdk.evolution.signals import CompetenceHistory
from coevolve_sdk.ids import id_stream
from coevolve_sdk.records import RolloutGroup, Signal
from coevolve_sdk.run.evaluation import Evaluator
from coevolve_sdk.run.interrupts import raise_if_interrupted
from coevolve_sdk.run.metrics import evolution_metrics, namespaced, step_metrics
from coevolve_sdk.run.progress import Progress
from coevolve_sdk.run.tensorboard import TensorBoard
from coevolve_sdk.run.report import write_report_safely
from coevolve_sdk.run.view import RunView
from coevolve_sdk.storage.checkpoints import read_state, save_checkpoint, set_aside
from coevolve_sdk.storage.diskspace import stops_cleanly
from coevolve_sdk.storage.space_watch import SpaceWatch
from coevolve_sdk.storage.lock import RunLock
from coevolve_sdk.storage.run_folder import RunFolder
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.training.algorithm import CheckpointError, CheckpointMismatch
from coevolve_sdk.training.rollout import EnvPool, collect_groups

__all__ = ["CoEvolveLoop"]


class CoEvolveLoop:
    def __init__(self, config: RunConfig, *, resume: bool = False, restart: bool = False, allow_config_change: bool = False,
                 registry: Registry | None = None, progress: Progress | None = None, source: str | None = None) -> None:
        self.config, self.resume, self.restart, self.allow_config_change = config, resume, restart, allow_config_change
        self.run_dir = Path(config.run_dir)
        self.registry = registry or get_registry()
        self.progress = progress or Progress(enabled=False)
        load_run_plugins(config, self.registry, warn=self.progress.log)
        self.parsed = validate_components(config, self.registry, source=source or str(self.run_dir / "config.yaml"))
        self.lock = RunLock(self.run_dir)
        if os.environ.get("RANK", "0") == "0":
            self.lock.acquire()  # before anything is written; other ranks never write the folder
        try:
            self._build(config, self.registry, self.parsed)
        except BaseException:
            self.lock.release()
            raise

    def _build(self, cfg: RunConfig, reg: Registry, p: dict[str, Any]) -> None:
        env_cls = reg.get("environment", cfg.environment.name)
        self.make_env = lambda: env_cls(p["environment"])
        self.context = RunContext(run_dir=self.run_dir, seed=cfg.seed, make_env=self.make_env, log=self.progress.log,
                                  progress=self._work)
        self.policy = reg.get("policy", cfg.policy.name)(p["policy"], self.context)
        self.context.policy = self.policy
        self.algorithm = reg.get("algorithm", cfg.algorithm.name)(p["algorithm"], self.context)
        self.procs = self.algorithm.processes  # how this process reaches the others (one, by default)
        self.main = self.procs.is_main_process
        if not self.main:
            self.lock.release()
        self.detectors = [reg.get("detector", d.name)(p[f"detectors.{i}"], self.context) for i, d in enumerate(cfg.detectors)]
        self.teacher = reg.get("teacher", cfg.teacher.name)(p["teacher"], self.context)
        self.history = CompetenceHistory()  # the checkpoint restores into this object; the sampler reads it
        self.sampler = attach_sampler(reg.get("sampler", cfg.pool.sampler.name)(p["pool.sampler"], self.context), self.history)
        self.rng = np.random.default_rng(cfg.seed)
        self.envs = EnvPool(self.make_env)
        self.evaluator = Evaluator(self.policy, self.envs, self.make_env, cfg.rollout, progress=self._work, log=self.progress.log)
        self.tensorboard, self.space = TensorBoard(self.run_dir / "tensorboard"), SpaceWatch(self.run_dir, cfg.training.checkpoint_every)
        self.step = 0
        self.store: RunStore | None = None
        self.pool: TaskPool | None = None

    def _attach(self) -> None:
        """Main process, the store rolled back to where the run starts: pool, hooks' view, scheduler."""
        assert self.store is not None
        self.pool = TaskPool(self.store)
        self.view = RunView(self.run_dir, self.config, self.pool, lambda: self.step)
        self.evolution = EvolutionScheduler.for_run(
            self.config, self.teacher, self.make_env, self.store, self.pool, [d.kind for d in self.detectors],
            silent_hints=[type(d).silent_hint for d in self.detectors], log=self.progress.log, agent=(self.policy, self.envs),
            on_admitted=lambda step, tasks: self.registry.call_hook("on_tasks_admitted", run=self.view, step=step, tasks=tasks),
            on_proposed=lambda step, c: self.registry.call_hook("on_tasks_proposed", run=self.view, step=step, candidates=c))

    @stops_cleanly  # a full disk anywhere: one message (DiskFull), exit 75 (docs/run-folder.md)
    def run(self) -> dict[str, Any]:
        cfg = self.config
        try:
            start = self._start()
            if start is None:  # a finished run: nothing to do but a report a full disk may have stopped
                if self.main and not (self.run_dir / "report.html").exists():
                    write_report_safely(self.run_dir, self.progress.log)
                return self._summary()
            if start["checkpoint"] is None and self.main:
                self._prepare()
            self.progress.start(total=cfg.training.steps, completed=self.step, description="training")
            for step in range(self.step + 1, cfg.training.steps + 1):
                raise_if_interrupted()
                self.step = step
                self._train_step(step)
                if step % cfg.training.checkpoint_every == 0 or step == cfg.training.steps:
                    self._checkpoint(step)
            raise_if_interrupted()
            for done in (self.algorithm, self.procs):  # every process has passed the last checkpoint's barrier
                done.close()
            if self.main and cfg.eval.after and cfg.training.steps > 0:
                self._evaluate("after")
            if self.main and self.store is not None:
                self.store.set_meta("status", "finished")
                write_report_safely(self.run_dir, self.progress.log)
            return self._summary()
        finally:
            self.progress.stop()
            for part in (self.envs, self.tensorboard, self.store):  # no store off the main process
                if part is not None:
                    part.close()
            self.lock.release()

    def _start(self) -> dict[str, Any] | None:
        """Where training starts, on every process: the newest checkpoint that loads (one whose
        files fail to load is set aside, saying so, and the one before it is tried)."""
        while True:
            start = self.procs.broadcast(self._begin() if self.main else None)
            if start is None or start["checkpoint"] is None:
                return start
            ckpt = Path(start["checkpoint"])
            problems = [p for p in self.procs.gather([self._restore(ckpt)]) if p]
            if not problems:
                return start
            if self.main:
                self.progress.log(f"checkpoint {ckpt.name} does not load ({problems[0]}): set aside as {set_aside(ckpt).name}; "
                                  f"trying the one before it")
                self.store.close()  # type: ignore[union-attr]

    def _begin(self) -> dict[str, Any] | None:
        """Main process: the folder rolled back to where training starts; None: finished, nothing to do."""
        start = RunFolder(self.run_dir).start(self.config, self.registry, resume=self.resume, restart=self.restart,
                                              allow_config_change=self.allow_config_change, log=self.progress.log)
        self.store, self.step, self._revision = start.store, start.step, start
        self._attach()
        if start.finished:
            return None
        self.restart = False  # if a checkpoint is set aside, _begin runs again: on the same folder
        return {"checkpoint": str(start.checkpoint) if start.checkpoint is not None else None}

    def _restore(self, ckpt: Path) -> str | None:
        """Every process: load the checkpoint the store was rolled back to; returns why its files did not load."""
        try:
            self.algorithm.load(ckpt / "algorithm")
        except CheckpointMismatch as e:  # an older checkpoint would not fit either: set nothing aside
            raise ResumeError(f"{e}. Undo that change to resume, or start again with --restart.") from None
        except CheckpointError as e:
            return str(e)
        except Exception as e:
            raise ResumeError(f"could not load {ckpt}: {type(e).__name__}: {e}. If the model or the algorithm changed since "
                              f"the checkpoint was written, undo that change.") from e
        state = read_state(ckpt)
        self.step = int(state["step"])
        if self.main:
            assert self.store is not None and self.pool is not None
            self.rng.bit_generator.state = state["rng"]
            self.history.load_state_dict(state["history"])
            for det, det_state in zip(self.detectors, state.get("detectors", [])):
                det.load_state_dict(det_state)
            self.evolution.recover_checkpoint(state)
            self._revision.record_revision()  # a changed config is recorded only once the checkpoint fits it
            self.progress.log(f"resumed from {ckpt.name}: step {self.step}, pool {len(self.pool)} tasks")
        return None

    def _prepare(self) -> None:
        """Seed pool (unless admitted already), [evaluation 'initial'], warm start, evaluation 'before'."""
        cfg = self.config
        assert self.store is not None and self.pool is not None
        if len(self.pool) == 0:
            admitted = build_seed_pool(cfg, self.make_env, self.pool, self.evolution.evolver, self.store, log=self.progress.log,
                                       progress=self._work)
            self.evolution.on_admitted(0, admitted)
        if cfg.training.warm_start:
            if cfg.eval.initial:
                self._evaluate("initial")
            self.progress.ensure_bar()
            t0 = time.perf_counter()
            demos = warm_start_tasks(self.config, self.make_env, self.pool, self.store, log=self.progress.log, progress=self._work)
            with blame(self.algorithm, "warm_start"):
                metrics = self.algorithm.warm_start(demos)
            killpoints.reached("warm_start")
            if metrics:
                self.store.add_metrics(0, {f"warm_start/{k}": v for k, v in metrics.items()} | {"time/warm_start": time.perf_counter() - t0})
        if cfg.eval.before:
            self._evaluate("before")

    def _train_step(self, step: int) -> None:
        cfg, seed, rank = self.config, self.config.seed, self.procs.rank
        metrics: dict[str, float] = {}
        if self.main:
            evolution_metrics(self.evolution.poll(step), metrics)
        t = time.perf_counter()
        with blame(self.sampler, "sample"):
            tasks = self.procs.broadcast(self.pool.sample(self.sampler, cfg.training.tasks_per_step, self.rng, step) if self.pool else None)
        with id_stream("rollout", seed, step, rank):
            groups = collect_groups(self.policy, self.envs, tasks[rank :: self.procs.world_size], cfg.rollout, step,
                                    seed=seed * 7_919 + step * 131 + rank)
        metrics["time/rollout"] = time.perf_counter() - t
        all_groups: list[RolloutGroup] = self.procs.gather(groups)
        if cfg.evolution.judge_rollouts == "confirm":  # judged on the main process, applied on every one
            metrics.update(judge_step(self.teacher, self.algorithm, groups, all_groups, self.store, step))
        if self.main:
            self.registry.call_hook("on_rollouts_collected", run=self.view, step=step, groups=all_groups)
        t = time.perf_counter()
        with blame(self.policy, "before_update"):
            self.policy.before_update()
        with blame(self.algorithm, "step"):
            metrics.update(namespaced("algo", self.algorithm.step(groups)))
        with blame(self.policy, "after_update"):  # a rollout engine with its own weights (vLLM) syncs here
            metrics.update(namespaced("policy", self.policy.after_update()))
        metrics["time/update"] = time.perf_counter() - t
        if not self.main:
            self.procs.barrier()
            return
        assert self.store is not None and self.pool is not None
        t = time.perf_counter()
        signals = self._detect(all_groups, step)
        metrics["time/signals"] = time.perf_counter() - t
        trajs = [tr for g in all_groups for tr in g.trajectories]
        self.store.record_step(step, trajs, signals)
        killpoints.reached("step_recorded")
        t = time.perf_counter()
        self.evolution.offer(signals, all_groups, step)  # a sync round runs here
        metrics["time/evolution_wait"] = metrics.get("time/evolution_wait", 0.0) + time.perf_counter() - t
        evolution_metrics(self.evolution.poll(step, final=step == cfg.training.steps), metrics)
        if cfg.eval.every and step % cfg.eval.every == 0 and step != cfg.training.steps:
            t = time.perf_counter()
            self._evaluate("during")
            metrics["time/eval"] = time.perf_counter() - t
        metrics.update(step_metrics(trajs, signals, [d.kind for d in self.detectors], self.pool.counts()))
        self.store.add_metrics(step, metrics)
        self.tensorboard.write(step, metrics)
        self.registry.call_hook("on_step_end", run=self.view, step=step, metrics=metrics)
        self.progress.step(step, metrics)
        self.procs.barrier()

    def _detect(self, groups: list[RolloutGroup], step: int) -> list[Signal]:
        with id_stream("signals", self.config.seed, step):
            signals: list[Signal] = []
            for det in self.detectors:
                with blame(det, "observe"):
                    signals += det.observe(groups, self.history, step)
        # only now does this step enter the history: detectors compare with earlier steps
        for g in groups:
            for tr in g.trajectories:
                self.history.record(g.task.id, step, tr.score, tr.success)
        self.registry.call_hook("on_signals_detected", run=self.view, step=step, signals=signals)
        return signals

    def _checkpoint(self, step: int) -> None:
        if self.main and self.store is not None:
            self.space.before_checkpoint(step, self.progress.warn, lambda s, text: self.store.add_note(s, "disk space", text))
        save_checkpoint(self.run_dir / "checkpoints", step, self.algorithm, self._state, keep=self.config.training.keep_checkpoints)
        if self.store is not None:
            self.store.set_meta("last_checkpoint_step", step)

    def _state(self) -> dict[str, Any]:
        """What a checkpoint records besides the algorithm's files (main process)."""
        assert self.store is not None and self.pool is not None
        return {"format": 2, "run_id": self.store.run_id, "step": self.step, "rng": self.rng.bit_generator.state,
                "history": self.history.state_dict(), "detectors": [d.state_dict() for d in self.detectors],
                "task_seq": self.store.max_task_seq(), "pool_size": len(self.pool), "evolution": self.evolution.state_dict()}

    def _evaluate(self, phase: str) -> None:
        ev, last = self.config.eval, phase == "after" or (phase == "before" and self.config.training.steps == 0)
        self.evaluator.record(phase, self.step, self.store, ev.split, ev.max_tasks, subset=ev.subset, whole=last)  # type: ignore[arg-type]

    def _work(self, what: str, done: int, total: int) -> None:
        self.progress.work(what, done, total)
        if "warm" in what.lower():
            killpoints.reached("warm_start")

    def _summary(self) -> dict[str, Any]:
        if not self.main or self.store is None or self.pool is None:
            return {}
        return {"run_dir": str(self.run_dir), "steps": self.step, "pool": self.pool.counts(), "evals": self.store.evals(),
                "rounds": self.evolution.round}
