"""Evaluation: the policy, greedily, on a fixed list of held-out tasks.

The paper's protocol: one greedy episode per task of the held-out split (``eval.split``, the
first ``eval.max_tasks`` of them), so an evaluation is deterministic and the same tasks are
scored before, during and after training. ``Evaluator`` is what the training loop uses;
``evaluate_run`` (``coevolve eval``, ``coevolve bfcl-eval``) scores a run folder's newest intact
checkpoint and builds only what that needs, the environment and the policy: no teacher (a
LiteLLM teacher whose API key is not set is no obstacle), no algorithm, no detectors, no lock
and no write to the run folder.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import coevolve_sdk.kill_points as killpoints
from coevolve_sdk.components.context import RunContext
from coevolve_sdk.config import RolloutConfig, RunConfig
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.env.contract import checked_tasks
from coevolve_sdk.errors import ResumeError
from coevolve_sdk.ids import id_stream
from coevolve_sdk.records import Task, Trajectory
from coevolve_sdk.storage.checkpoints import newest_intact, read_state
from coevolve_sdk.training.algorithm import find_policy_dir
from coevolve_sdk.training.policy import Policy
from coevolve_sdk.training.rollout import EnvPool, collect_groups

if TYPE_CHECKING:
    from coevolve_sdk.storage.store import RunStore

__all__ = ["Evaluator", "evaluate_run"]


class Evaluator:
    """Greedy evaluation for the loop: shares its policy and environment pool."""

    def __init__(self, policy: Policy, envs: EnvPool, make_env: Callable[[], AgentEnv], rollout: RolloutConfig,
                 *, progress: Callable[[str, int, int], None] | None = None, log: Callable[[str], None] = print) -> None:
        self.policy = policy
        self.envs = envs
        self.make_env = make_env
        self.settings = rollout.model_copy(update={"group_size": 1, "temperature": 0.0})
        self.progress = progress or (lambda what, done, total: None)
        self.log = log
        self._tasks: dict[tuple[str, int | None], list[Task]] = {}

    def tasks(self, split: str, max_tasks: int | None = None) -> list[Task]:
        """The first ``max_tasks`` tasks of ``split`` (the same list every time)."""
        key = (split, max_tasks)
        if key not in self._tasks:
            env = self.make_env()
            try:
                tasks = checked_tasks(env, split)
            finally:
                env.close()
            self._tasks[key] = list(tasks[:max_tasks] if max_tasks is not None else tasks)
        return self._tasks[key]

    def evaluate(self, tasks: list[Task], step: int, phase: str) -> tuple[dict[str, Any], list[Trajectory]]:
        """One greedy episode per task, in chunks so that progress can be shown. Returns the
        row (tasks, success_rate, mean_score, seconds) and the trajectories."""
        t0 = time.perf_counter()
        what = f"evaluating ({phase})"
        chunk = max(8, math.ceil(len(tasks) / 10))
        trajs: list[Trajectory] = []
        # ids from a stream named by the evaluation: a replayed evaluation writes the same rows
        with id_stream("eval", phase, step):
            for i in range(0, len(tasks), chunk):
                groups = collect_groups(self.policy, self.envs, tasks[i : i + chunk], self.settings, step, greedy=True)
                trajs.extend(g.trajectories[0] for g in groups)
                self.progress(what, len(trajs), len(tasks))
        n = max(1, len(trajs))
        row = {
            "tasks": len(trajs),
            "success_rate": sum(t.success for t in trajs) / n,
            "mean_score": sum(t.score for t in trajs) / n,
            "seconds": time.perf_counter() - t0,
        }
        return row, trajs


    def record(self, phase: str, step: int, store: "RunStore", split: str, max_tasks: int | None, *,
               subset: int | None = None, whole: bool = True) -> None:
        """The loop's evaluations (``before``, ``during``, ``after``): evaluate and write the row
        and its trajectories to the store in one transaction, replacing an earlier attempt's.

        With ``subset``, an evaluation that is not ``whole`` scores only the first ``subset``
        tasks; a ``whole`` one scores them all and adds the subset's figures to its row."""
        try:
            tasks = self.tasks(split, max_tasks)
        except Exception as e:
            self.log(f"evaluation skipped: the environment has no split '{split}' ({e})")
            return
        if subset is not None and not whole:
            tasks = tasks[:subset]
        if not tasks:
            return
        self.log(f"evaluating ({phase}) greedily on {len(tasks)} '{split}' tasks ...")
        row, trajs = self.evaluate(tasks, step, phase)
        if subset is not None and whole:
            part = trajs[:subset]
            row |= {"subset_tasks": len(part), "subset_success_rate": sum(t.success for t in part) / max(1, len(part)),
                    "subset_mean_score": sum(t.score for t in part) / max(1, len(part))}
        killpoints.reached(f"eval_{phase}")
        store.record_eval(step, phase, split, row, trajs)
        self.log(f"eval {phase}: success {row['success_rate']:.3f}, mean score {row['mean_score']:.3f} over {row['tasks']} tasks")


def evaluate_run(run_dir: Path, overrides: dict[str, Any] | None = None, split: str | None = None, max_tasks: int | None = None,
                 *, progress: Callable[[str, int, int], None] | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Greedy evaluation of a run folder's newest intact checkpoint (``coevolve eval``).

    ``overrides`` change the config as ``--set`` does (e.g. the environment's options, to score
    the same checkpoint on each BFCL category in turn). Plugins reuse it for their own reports."""
    from coevolve_sdk.components.registry import get_registry
    from coevolve_sdk.config import load_config, resolve_component
    from coevolve_sdk.config.plugins import load_run_plugins

    run_dir = Path(run_dir)
    say = log or (lambda m: None)
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.exists():
        raise ResumeError(f"{run_dir} is not a run folder (no config.yaml). Pass the run_dir of a run started with `coevolve run`.")
    cfg: RunConfig = load_config(cfg_path, {**(overrides or {}), "run_dir": str(run_dir)})
    registry = get_registry()
    load_run_plugins(cfg, registry, warn=say)
    env_cls, env_opts = resolve_component(registry, "environment", cfg.environment, "environment", str(cfg_path))
    pol_cls, pol_opts = resolve_component(registry, "policy", cfg.policy, "policy", str(cfg_path))

    def make_env() -> AgentEnv:
        return env_cls(env_opts)

    context = RunContext(run_dir=run_dir, seed=cfg.seed, make_env=make_env, log=say, progress=progress or (lambda w, d, t: None))
    policy: Policy = pol_cls(pol_opts, context)
    context.policy = policy
    ckpt = newest_intact(run_dir / "checkpoints", lambda bad, problem: say(
        f"checkpoint {bad.name} is damaged ({problem}); trying the one before it"))
    step = 0
    if ckpt is not None:
        weights = find_policy_dir(ckpt)  # step-N/policy, or step-N/algorithm/policy before that layout
        try:
            policy.load(weights)
        except Exception as e:
            raise ResumeError(f"could not load the policy's weights from {weights}: {type(e).__name__}: {e}. Check that the "
                              f"config's policy is the one the run trained (--set can change it).") from e
        step = int(read_state(ckpt).get("step", 0))
    else:
        say(f"{run_dir} has no checkpoint: evaluating the policy as configured (untrained)")
    envs = EnvPool(make_env)
    try:
        evaluator = Evaluator(policy, envs, make_env, cfg.rollout, progress=progress, log=say)
        the_split = split or cfg.eval.split
        tasks = evaluator.tasks(the_split, max_tasks)
        row, _ = evaluator.evaluate(tasks, step, "cli")
    finally:
        envs.close()
    return {
        **{k: row[k] for k in ("tasks", "success_rate", "mean_score")},
        "checkpoint": ckpt.name if ckpt else None,
        "step": step,
        "split": the_split,
        "environment": {"name": cfg.environment.name, **cfg.environment.options},
    }
