"""CoEvolveLoop: the closed loop of the paper, top to bottom.

    D_0 ← unguided exploration (validated)              _seed_pool
    optional warm start on D_0's reference actions      algorithm.warm_start
    for t = 1..T:
        X ← sample(D_t)                                  pool.sample
        groups ← K rollouts of every x ∈ X               collect_groups
        θ ← GRPO step on groups                          algorithm.step
        S ← S ∪ detectors(groups, history)               _detect
        if t mod F = 0: D_t ← D_t ∪ validate(teach(S))   _evolve
        checkpoint                                       _checkpoint

Everything that must survive a crash is either in the run store (committed per step and per
admitted task) or in the checkpoint (model, optimiser, detector state, competence history,
buffered signals, RNG, step); ``CoEvolveLoop(config, resume=True)`` continues from the last
checkpoint and re-runs the steps after it.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from .checkpoint import begin_checkpoint, commit_checkpoint, latest_checkpoint, read_state, tmp_path
from .config import RunConfig, validate_components
from .context import RunContext
from .environment import AgentEnv
from .errors import ResumeError
from .evolution import Evolver, RoundResult
from .interrupts import raise_if_interrupted
from .pool import TaskPool
from .registry import Registry, get_registry
from .rollout import EnvPool, collect_groups, evaluate
from .signals import CompetenceHistory
from .store import RunStore
from .types import RolloutGroup, Signal, Task, Trajectory
from .validation import Validator

__all__ = ["CoEvolveLoop"]


class CoEvolveLoop:
    def __init__(
        self,
        config: RunConfig,
        *,
        resume: bool = False,
        registry: Registry | None = None,
        progress: "Progress | None" = None,
    ) -> None:
        self.config = config
        self.run_dir = Path(config.run_dir)
        self.resume = resume
        self.registry = registry or get_registry()
        for mod in config.plugins:
            self.registry.add_module(mod)
        self.parsed = validate_components(config, self.registry, source=str(self.run_dir / "config.yaml"))
        from .progress import Progress

        self.progress = progress or Progress(enabled=False)
        self._build()

    # ------------------------------------------------------------------ construction
    def _build(self) -> None:
        cfg = self.config
        reg = self.registry
        env_cls = reg.get("environment", cfg.environment.name)
        env_opts = self.parsed["environment"]
        self.make_env: Callable[[], AgentEnv] = lambda: env_cls(env_opts)
        self.context = RunContext(run_dir=self.run_dir, seed=cfg.seed, make_env=self.make_env,
                                  log=self.progress.log, progress=self.progress.work)
        self.policy = reg.get("policy", cfg.policy.name)(self.parsed["policy"], self.context)
        self.context.policy = self.policy
        self.algorithm = reg.get("algorithm", cfg.algorithm.name)(self.parsed["algorithm"], self.context)
        self.main = self.algorithm.is_main_process
        self.detectors = [reg.get("detector", d.name)(self.parsed[f"detectors.{i}"], self.context) for i, d in enumerate(cfg.detectors)]
        self.teacher = reg.get("teacher", cfg.teacher.name)(self.parsed["teacher"], self.context)
        self.sampler = reg.get("sampler", cfg.pool.sampler.name)(self.parsed["pool.sampler"], self.context)
        self.history = CompetenceHistory()
        self.rng = np.random.default_rng(cfg.seed)
        self.envs = EnvPool(self.make_env)
        self.step = 0
        self.round = 0
        self.pending_signals: list[Signal] = []
        self.pending_trajectories: dict[str, Trajectory] = {}
        self._async: Future[RoundResult] | None = None
        # the round running in the background, as checkpoints record it: its signals go back to
        # the queue, or its validated tasks into the pool, if the run stops before admitting it
        self._in_flight: dict[str, Any] | None = None
        self._last_admitted_round = 0
        self._executor: ThreadPoolExecutor | None = None
        self.store: RunStore | None = None
        self.pool: TaskPool | None = None
        if self.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.store = RunStore(self.run_dir / "run.sqlite")
            self.pool = TaskPool(self.store)
            self.evolver = Evolver(
                self.teacher,
                Validator(cfg.validation),
                self.make_env,
                self.store,
                workers=cfg.evolution.workers,
                max_signals_per_kind=cfg.evolution.max_signals_per_kind,
                max_admitted=cfg.evolution.max_admitted_per_round,
                on_proposed=lambda step, cands: self.registry.hook.on_tasks_proposed(loop=self, step=step, candidates=cands),
                seed=cfg.seed,
            )
        self._tb = None

    # ------------------------------------------------------------------ public
    def run(self) -> dict[str, Any]:
        cfg = self.config
        if self.resume and latest_checkpoint(self.run_dir / "checkpoints") is None:
            # stopped before its first checkpoint: train again from step 0, keeping every task
            # admitted so far (the seed pool is not explored again)
            if self.main:
                self._start_over()
        elif self.resume:
            self._restore()
        elif self.main:
            self._start_fresh()
        start = self.step + 1
        self.progress.start(total=cfg.training.steps, completed=self.step, description="training")
        try:
            for step in range(start, cfg.training.steps + 1):
                raise_if_interrupted()
                self.step = step
                self._train_step(step)
                if step % cfg.training.checkpoint_every == 0 or step == cfg.training.steps:
                    self._checkpoint(step)
            raise_if_interrupted()
            # every process has passed the last checkpoint's barrier: nothing collective is left
            self.algorithm.close()
            self._finish_async(wait=True)
            if self.main and cfg.eval.after and cfg.training.steps > 0:
                self._evaluate("after")
            summary = self._summary()
            if self.main:
                self.store.set_meta("status", "finished")
                self._write_report()
            return summary
        finally:
            self.progress.stop()
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
            self.envs.close()

    # ------------------------------------------------------------------ start / resume
    def _start_fresh(self) -> None:
        cfg = self.config
        assert self.store is not None and self.pool is not None
        if latest_checkpoint(self.run_dir / "checkpoints") is not None or self.store.steps_done():
            raise ResumeError(
                f"{self.run_dir} already holds a run. Continue it with `coevolve run --resume {self.run_dir}`, "
                f"or choose another run_dir (or delete that folder) to start afresh."
            )
        (self.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        self.store.set_meta("config", cfg.model_dump(mode="json"))
        self._prepare()

    def _start_over(self) -> None:
        assert self.store is not None and self.pool is not None
        self.progress.log(
            f"{self.run_dir} has no checkpoint yet: training starts again from step 0 with the {len(self.pool)} tasks "
            f"already admitted"
        )
        # a background round that finished before the stop kept its validated tasks in the store
        admitted = self._admit_stored([t for rd in self.store.rounds() for t in rd.get("accepted_tasks", [])], step=0)
        if admitted:
            self.progress.log(f"admitted {len(admitted)} validated tasks of a round that finished before the stop")
        self.store.truncate_after(0, after_round=0)
        self.store.set_meta("last_admitted_round", 0)
        self._prepare()

    def _prepare(self) -> None:
        """Seed pool (unless tasks are already admitted), warm start, evaluation before training."""
        cfg = self.config
        assert self.store is not None and self.pool is not None
        self.store.set_meta("status", "running")
        if len(self.pool) == 0:
            self._seed_pool()
        if cfg.training.warm_start:
            self.progress.ensure_bar()
            t0 = time.perf_counter()
            self.progress.log("warm start on the seed pool's reference actions ...")
            metrics = self.algorithm.warm_start(self.pool.tasks)
            if metrics:
                self.store.add_metrics(0, {f"warm_start/{k}": v for k, v in metrics.items()} | {"time/warm_start": time.perf_counter() - t0})
        if cfg.eval.before:
            self._evaluate("before")

    def _seed_pool(self) -> None:
        cfg = self.config
        assert self.store is not None and self.pool is not None
        env = self.make_env()
        bases = env.tasks("train")
        n = cfg.pool.seed_tasks
        t0 = time.perf_counter()
        if cfg.pool.seed_source == "env":
            tasks = [t.model_copy(update={"origin": "seed"}) for t in bases[:n]]
            admitted = self.pool.admit(tasks, step=0)
            self.progress.log(f"seed pool: {len(admitted)} tasks from the environment's train split")
        else:
            self.progress.log(f"seed pool: exploring for {n} tasks with teacher '{self.teacher.name}' ...")
            found, stats = self.evolver.seed_pool(bases, n, self.pool.fingerprints, step=0)
            admitted = self.pool.admit(found, step=0)
            self.progress.log(f"seed pool: {len(admitted)} validated tasks ({stats['candidates']} proposed)")
        if not admitted:
            raise ResumeError(
                "the seed pool is empty: exploration produced no valid task. Try pool.seed_source: env, more "
                "teacher rounds/steps, or check the environment's sample_action()."
            )
        self.store.add_metrics(0, {"time/seed_pool": time.perf_counter() - t0, "pool/size": len(self.pool)})
        self.registry.hook.on_tasks_admitted(loop=self, step=0, tasks=admitted)

    def _restore(self) -> None:
        ckpt = latest_checkpoint(self.run_dir / "checkpoints")
        if ckpt is None:
            raise ResumeError(
                f"{self.run_dir} has no complete checkpoint to resume from. A run writes its first checkpoint after "
                f"training.checkpoint_every steps; start it again without --resume."
            )
        state = read_state(ckpt)
        self.algorithm.load(ckpt / "algorithm")
        self.step = int(state["step"])
        self.round = int(state.get("round", 0))
        self.rng.bit_generator.state = state["rng"]
        self.history.load_state_dict(state["history"])
        for det, det_state in zip(self.detectors, state.get("detectors", [])):
            det.load_state_dict(det_state)
        self.pending_signals = [Signal.model_validate(s) for s in state.get("pending_signals", [])]
        self.pending_trajectories = {k: Trajectory.model_validate(v) for k, v in state.get("pending_trajectories", {}).items()}
        self._last_admitted_round = int(state.get("last_admitted_round", 0))
        if self.main:
            assert self.store is not None
            self._recover_round(state.get("in_flight_round"))
            self.store.truncate_after(self.step, after_round=self.round)
            self.store.set_meta("last_admitted_round", self._last_admitted_round)
            self.store.set_meta("status", "running")
            self.store.set_meta("resumed_from", self.step)
            self.progress.log(f"resumed from {ckpt.name}: step {self.step}, pool {len(self.pool or [])} tasks")

    def _recover_round(self, in_flight: dict[str, Any] | None) -> None:
        """Finish the background round that was running at the checkpoint: it may have been
        admitted since (nothing to do), finished and validated but not admitted (admit its tasks
        now, without paying the teacher again), or cut short (queue its signals again)."""
        assert self.store is not None and self.pool is not None
        if not in_flight:
            return
        r = in_flight["round"]
        if int(self.store.get_meta("last_admitted_round", 0)) >= r:
            self._last_admitted_round = r
            return
        done = next((rd for rd in self.store.rounds() if rd["round"] == r and rd["step"] == in_flight["step"]), None)
        if done is not None and "accepted_tasks" in done:
            admitted = self._admit_stored(done["accepted_tasks"], step=self.step)
            self._last_admitted_round = r
            self.progress.log(f"round {r} had finished before the stop: admitted {len(admitted)} of its validated tasks")
            return
        self.pending_signals = [Signal.model_validate(x) for x in in_flight["signals"]] + self.pending_signals
        self.pending_trajectories = {**{k: Trajectory.model_validate(v) for k, v in in_flight["trajectories"].items()},
                                     **self.pending_trajectories}
        self.progress.log(f"round {r} was cut short by the stop: its {len(in_flight['signals'])} signals go to the next round")

    def _admit_stored(self, stored: list[dict[str, Any]], step: int) -> list[Task]:
        """Admit the validated tasks a round wrote to the store before a stop (the teacher is
        not paid again); tasks already in the pool are skipped by the pool itself."""
        assert self.pool is not None
        admitted = self.pool.admit([Task.model_validate(t) for t in stored], step=step)
        if admitted:
            self.registry.hook.on_tasks_admitted(loop=self, step=step, tasks=admitted)
        return admitted

    # ------------------------------------------------------------------ one step
    def _train_step(self, step: int) -> None:
        cfg = self.config
        timings: dict[str, float] = {}
        self._finish_async(wait=False)
        t = time.perf_counter()
        tasks: list[Task] | None = None
        if self.main:
            assert self.pool is not None
            tasks = self.pool.sample(self.sampler, cfg.training.tasks_per_step, self.rng, step)
        tasks = self.algorithm.broadcast(tasks)
        local = tasks[self.algorithm.rank :: self.algorithm.world_size]
        groups = collect_groups(
            self.policy, self.envs, local, cfg.rollout, step,
            seed=cfg.seed * 7_919 + step * 131 + self.algorithm.rank,
        )
        timings["time/rollout"] = time.perf_counter() - t
        if cfg.evolution.judge_rollouts == "confirm":
            timings.update(self._second_opinion(groups))
        all_groups: list[RolloutGroup] = self.algorithm.gather(groups)
        if self.main:
            self.registry.hook.on_rollouts_collected(loop=self, step=step, groups=all_groups)
        t = time.perf_counter()
        self.policy.before_update()
        algo_metrics = self.algorithm.step(groups)
        # a rollout engine with its own copy of the weights (vLLM) syncs here, on every process
        after_update = getattr(self.policy, "after_update", None)
        if callable(after_update):
            algo_metrics = {**algo_metrics, **(after_update() or {})}
        timings["time/update"] = time.perf_counter() - t
        if not self.main:
            self.algorithm.barrier()
            return
        t = time.perf_counter()
        signals = self._detect(all_groups, step)
        timings["time/signals"] = time.perf_counter() - t
        trajs = [tr for g in all_groups for tr in g.trajectories]
        metrics: dict[str, float] = {
            "reward_mean": float(np.mean([tr.score for tr in trajs])) if trajs else 0.0,
            "success_rate": float(np.mean([tr.success for tr in trajs])) if trajs else 0.0,
            "episode_turns": float(np.mean([tr.info.get("turns", 0) for tr in trajs])) if trajs else 0.0,
            "generated_tokens": float(sum(tr.info.get("generated_tokens", 0) for tr in trajs)),
            **{k: float(v) for k, v in algo_metrics.items()},
            **timings,
        }
        kinds = sorted({d.kind for d in self.detectors} | {s.kind for s in signals})
        for kind in kinds:
            metrics[f"signals/{kind}"] = float(sum(1 for s in signals if s.kind == kind))
        evo_seconds = 0.0
        if cfg.evolution.enabled and step % cfg.evolution.every == 0:
            t = time.perf_counter()
            self._evolve(step)
            evo_seconds = time.perf_counter() - t
        metrics["time/evolution_wait"] = evo_seconds
        if cfg.eval.every and step % cfg.eval.every == 0 and step != cfg.training.steps:
            t = time.perf_counter()
            self._evaluate("during")
            metrics["time/eval"] = time.perf_counter() - t
        assert self.pool is not None and self.store is not None
        for origin, n in self.pool.counts().items():
            metrics[f"pool/{origin}"] = float(n)
        metrics["pool/size"] = float(len(self.pool))
        self.store.record_step(step, trajs, signals, metrics)
        self._tensorboard(step, metrics)
        self.registry.hook.on_step_end(loop=self, step=step, metrics=metrics)
        self.progress.step(step, metrics)
        self.algorithm.barrier()

    def _second_opinion(self, groups: list[RolloutGroup]) -> dict[str, float]:
        """The teacher's judge as a second opinion on synthetic tasks, whose grader is derived
        from their own reference actions: a success it rejects becomes a failure (score 0)."""
        from .teacher import usage_meter

        rejected = 0
        with usage_meter() as meter:
            for g in groups:
                if g.task.origin != "synthetic":
                    continue
                for tr in g.trajectories:
                    if not tr.success:
                        continue
                    opinion = self.teacher.judge(g.task, tr)
                    tr.info["judge"] = opinion
                    if opinion is False:
                        tr.score, tr.success = 0.0, False
                        rejected += 1
        return {"judge/calls": float(meter.calls), "judge/rejected": float(rejected), "judge/cost_usd": meter.cost_usd}

    def _detect(self, groups: list[RolloutGroup], step: int) -> list[Signal]:
        signals: list[Signal] = []
        for det in self.detectors:
            found = det.observe(groups, self.history, step)
            signals.extend(found)
        # only now does this step enter the history: detectors compare with earlier steps
        for g in groups:
            for tr in g.trajectories:
                self.history.record(g.task.id, step, tr.score, tr.success)
        self.registry.hook.on_signals_detected(loop=self, step=step, signals=signals)
        if signals:
            self.pending_signals.extend(signals)
            by_id = {tr.id: tr for g in groups for tr in g.trajectories}
            for s in signals:
                for tid in {s.trajectory_id, *s.trajectory_ids}:
                    if tid in by_id:
                        self.pending_trajectories[tid] = by_id[tid].without_tokens()
        return signals

    # ------------------------------------------------------------------ evolution
    def _evolve(self, step: int) -> None:
        assert self.pool is not None
        evo = self.config.evolution
        unguided = evo.guidance == "random"
        if not self.pending_signals and not unguided:
            return
        if self._async is not None and not self._async.done():
            return  # the previous round is still running; its signals keep accumulating
        self.round += 1
        signals, trajs = self.pending_signals, self.pending_trajectories
        self.pending_signals, self.pending_trajectories = [], {}
        if unguided:
            # the random-exploration arm: start from pool tasks drawn at random (its own RNG, so
            # the training sample stream is the one every arm sees), not from the signals
            pool_tasks = self.pool.tasks
            n = evo.random_starts or 3 * (evo.max_signals_per_kind or 16)
            rng = np.random.default_rng([self.config.seed, 104_729, self.round])
            idx = rng.choice(len(pool_tasks), size=min(n, len(pool_tasks)), replace=False)
            signals = [Signal(kind="random", task_id=pool_tasks[int(i)].id, trajectory_id="", step=step,
                              reason="unguided exploration from a pool task drawn at random") for i in idx]
            trajs = {}
        tasks = {t.id: t for t in self.pool.tasks}
        args = (self.round, step, signals, trajs, tasks, self.pool.fingerprints)
        kwargs = {"unguided": unguided}
        if self.config.evolution.mode == "async":
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coevolve-async")
            self._async = self._executor.submit(self.evolver.run_round, *args, **kwargs)
            self._in_flight = {
                "round": self.round,
                "step": step,
                "signals": [x.model_dump(mode="json") for x in signals],
                "trajectories": {k: v.model_dump(mode="json") for k, v in trajs.items()},
            }
            self.progress.log(f"round {self.round}: evolving {len(signals)} signals in the background")
        else:
            self._admit(self.evolver.run_round(*args, **kwargs))

    def _finish_async(self, wait: bool) -> None:
        fut = self._async
        if fut is None or (not wait and not fut.done()):
            return
        self._async = None
        try:
            result = fut.result()
        except Exception as e:
            self._in_flight = None
            self.progress.log(f"background evolution round failed: {type(e).__name__}: {e}")
            return
        self._admit(result)
        self._in_flight = None

    def _admit(self, result: RoundResult) -> None:
        assert self.pool is not None and self.store is not None
        admitted = self.pool.admit(result.accepted, step=self.step)
        self._last_admitted_round = result.round
        self.store.set_meta("last_admitted_round", result.round)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.by_kind.items())) or "none"
        extra = " (budget exhausted)" if result.budget_exhausted else ""
        if result.over_budget:
            extra += f" ({result.over_budget} validated tasks over the round's admission cap left out)"
        self.progress.log(
            f"round {result.round} (step {result.step}): signals {kinds}; {result.candidates} proposed, "
            f"{len(admitted)} admitted, {result.rejected} rejected{extra}; pool {len(self.pool)}"
        )
        self.store.add_metrics(result.step, {"evolution/admitted": len(admitted), "evolution/candidates": result.candidates,
                                             "evolution/seconds": result.seconds})
        if admitted:
            self.registry.hook.on_tasks_admitted(loop=self, step=self.step, tasks=admitted)

    # ------------------------------------------------------------------ checkpoint / eval / report
    def _checkpoint(self, step: int) -> None:
        state = {
            "step": step,
            "round": self.round,
            "rng": self.rng.bit_generator.state,
            "history": self.history.state_dict(),
            "detectors": [d.state_dict() for d in self.detectors],
            "pending_signals": [s.model_dump(mode="json") for s in self.pending_signals],
            "pending_trajectories": {k: v.model_dump(mode="json") for k, v in self.pending_trajectories.items()},
            "pool_size": len(self.pool) if self.pool is not None else None,
            "in_flight_round": self._in_flight,
            "last_admitted_round": self._last_admitted_round,
        }
        root = self.run_dir / "checkpoints"
        # every process saves its share (accelerate writes per-rank RNG states) into the same
        # tmp folder; only then does the main process commit it atomically
        if self.main:
            begin_checkpoint(root, step)
        self.algorithm.barrier()
        self.algorithm.save(tmp_path(root, step) / "algorithm")
        self.algorithm.barrier()
        if self.main:
            commit_checkpoint(root, step, state, keep=self.config.training.keep_checkpoints)
            assert self.store is not None
            self.store.set_meta("last_checkpoint_step", step)
        self.algorithm.barrier()

    def _evaluate(self, phase: str) -> None:
        assert self.store is not None
        cfg = self.config
        env = self.make_env()
        try:
            tasks = env.tasks(cfg.eval.split)
        except Exception as e:
            self.progress.log(f"evaluation skipped: the environment has no split '{cfg.eval.split}' ({e})")
            return
        if cfg.eval.max_tasks is not None:
            tasks = tasks[: cfg.eval.max_tasks]
        if not tasks:
            return
        t0 = time.perf_counter()
        self.progress.log(f"evaluating ({phase}) greedily on {len(tasks)} '{cfg.eval.split}' tasks ...")
        res = evaluate(self.policy, self.envs, tasks, cfg.rollout, self.step)
        trajs = res.pop("trajectories")
        self.store.add_trajectories(trajs, self.step, phase=f"eval-{phase}")
        res["seconds"] = time.perf_counter() - t0
        self.store.record_eval(self.step, phase, cfg.eval.split, res)
        self.progress.log(f"eval {phase}: success {res['success_rate']:.3f}, mean score {res['mean_score']:.3f} over {res['tasks']} tasks")

    def _tensorboard(self, step: int, metrics: dict[str, float]) -> None:
        if self._tb is False:
            return
        if self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415

                self._tb = SummaryWriter(str(self.run_dir / "tensorboard"))
            except Exception:
                self._tb = False
                return
        for k, v in metrics.items():
            self._tb.add_scalar(k, v, step)
        self._tb.flush()

    def _summary(self) -> dict[str, Any]:
        if not self.main:
            return {}
        assert self.store is not None and self.pool is not None
        return {
            "run_dir": str(self.run_dir),
            "steps": self.step,
            "pool": self.pool.counts(),
            "evals": self.store.evals(),
            "rounds": self.round,
        }

    def _write_report(self) -> None:
        try:
            from .report import write_report

            path = write_report(self.run_dir)
            self.progress.log(f"report: {path}")
        except Exception as e:  # a report problem must not fail a finished run
            self.progress.log(f"could not write the report: {type(e).__name__}: {e}")


def load_run_config(run_dir: Path) -> RunConfig:
    """The config a run was started with (for --resume)."""
    p = run_dir / "config.yaml"
    if not p.exists():
        raise ResumeError(f"{run_dir} is not a run folder (no config.yaml). Pass the run_dir of a run started with `coevolve run`.")
    from .config import load_config

    return load_config(p)



def evaluate_run(run_dir: Path, overrides: dict[str, Any] | None = None, split: str | None = None,
                 max_tasks: int | None = None) -> dict[str, Any]:
    """Greedy evaluation of a run's last checkpoint (``coevolve eval``); plugins reuse it for
    their own reports (``coevolve bfcl-eval`` loops over BFCL's categories)."""
    from .checkpoint import latest_checkpoint
    from .config import load_config
    from .progress import Progress

    run_dir = Path(run_dir)
    cfg = load_run_config(run_dir)
    if overrides:
        cfg = load_config(run_dir / "config.yaml", {**overrides, "run_dir": str(run_dir)})
    loop = CoEvolveLoop(cfg, resume=True, progress=Progress(enabled=False))
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    if ckpt is not None:
        loop.algorithm.load(ckpt / "algorithm")
    env = loop.make_env()
    the_split = split or cfg.eval.split
    tasks = env.tasks(the_split)
    if max_tasks:
        tasks = tasks[:max_tasks]
    res = evaluate(loop.policy, loop.envs, tasks, cfg.rollout, loop.step)
    res.pop("trajectories")
    res["checkpoint"] = ckpt.name if ckpt else None
    res["split"] = the_split
    res["environment"] = {"name": cfg.environment.name, **cfg.environment.options}
    return res
