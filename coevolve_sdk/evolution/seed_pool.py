"""The seed pool D_0, the check of seed tasks taken from the environment, and the tasks the
warm start clones (the seed pool's, or more of the train split's: ``warm_start_tasks``).

``build_seed_pool`` fills the empty pool: from the environment's train split
(``pool.seed_source: env``) or by the teacher's unguided exploration, validated like every
synthetic task (``explore``, the paper's D_0). The store records the pool's last task
(``seed_pool_seq``) in the same breath, so a run stopped before its first checkpoint keeps a
complete seed pool (the teacher is not paid twice) and explores again an incomplete one.

Seed tasks taken from the environment are checked before anything trains on them.

The warm start imitates a seed task's reference actions and every step samples from the seed
pool, so a seed task whose actions do not solve it teaches the wrong thing silently. Each task
the environment offers (``pool.seed_source: env``) must be a ``Task`` whose payload is JSON
(it is stored), and its reference actions are replayed in a fresh environment: a task whose
replay fails is left out of the pool with a loud warning in the console and the report. Tasks
without reference actions have nothing to replay and are kept (the warm start skips them).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

import coevolve_sdk.kill_points as killpoints
from coevolve_sdk.components.blame import ComponentError, blame
from coevolve_sdk.env.contract import GraderError, ToolReturnTypeError, checked_tasks, is_task_list, not_tasks_error
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.errors import ConfigError
from coevolve_sdk.ids import id_stream
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Task

if TYPE_CHECKING:
    from coevolve_sdk.config import RunConfig
    from coevolve_sdk.evolution.rounds import Evolver
    from coevolve_sdk.evolution.pool import TaskPool

__all__ = ["build_seed_pool", "check_seed_tasks", "warm_start_tasks"]


def build_seed_pool(cfg: "RunConfig", make_env: Callable[[], AgentEnv], pool: "TaskPool", evolver: "Evolver", store: RunStore, *,
                    log: Callable[[str], None], progress: Callable[[str, int, int], None]) -> list[Task]:
    env = make_env()
    try:
        bases = checked_tasks(env, "train")
    finally:
        env.close()
    n = cfg.pool.seed_tasks
    t0 = time.perf_counter()
    with id_stream("seed-pool", cfg.seed):  # the same ids if the seed pool is explored again
        if cfg.pool.seed_source == "env":
            tasks = check_seed_tasks(make_env, bases[:n], store, log=log, progress=progress)
            admitted = pool.admit([t.model_copy(update={"origin": "seed"}) for t in tasks], step=0)
            log(f"seed pool: {len(admitted)} tasks from the environment's train split")
            _report_duplicates(tasks, admitted, store, log=log)
        else:
            log(f"seed pool: exploring for {n} tasks with teacher '{evolver.teacher.name}' ...")
            found, stats = evolver.seed_pool(bases, n, pool.fingerprints, step=0)
            admitted = pool.admit(found, step=0)
            log(f"seed pool: {len(admitted)} validated tasks ({stats['candidates']} proposed)")
    if not admitted:
        raise ConfigError("the seed pool is empty: no valid task. Try pool.seed_source: env, more teacher rounds/steps, or "
                          "check the environment's tasks('train') and sample_action().")
    store.set_meta("seed_pool_seq", store.max_task_seq())
    store.add_metrics(0, {"time/seed_pool": time.perf_counter() - t0, "pool/size": len(pool)})
    killpoints.reached("seed_pool")
    return admitted


def warm_start_tasks(cfg: "RunConfig", make_env: Callable[[], AgentEnv], pool: "TaskPool", store: RunStore, *,
                     log: Callable[[str], None], progress: Callable[[str, int, int], None]) -> list[Task]:
    """What the warm start clones: the seed pool's tasks, or the environment's first
    ``training.warm_start_tasks`` train tasks (demonstrations beyond the pool RL trains on).
    Those beyond the pool get the seed tasks' replay check: a demonstration whose actions do not
    solve its task would teach the wrong thing as silently as a bad seed task."""
    n = cfg.training.warm_start_tasks
    if n is None:
        log("warm start on the seed pool's reference actions ...")
        return list(pool.tasks)
    env = make_env()
    try:
        offered = [t for t in checked_tasks(env, "train")[:n] if t.reference_actions]
        in_pool = {t.fingerprint() for t in pool.tasks}
        # _check returns the very task objects that passed; the train split's order is kept
        passed = {id(t) for t in _check(env, [t for t in offered if t.fingerprint() not in in_pool], store, log=log,
                                        progress=progress, demos=True)}
        tasks = [t for t in offered if id(t) in passed or t.fingerprint() in in_pool]
    finally:
        env.close()
    if not tasks:
        raise ConfigError(f"training.warm_start_tasks: {n}, but none of the environment's first {n} train tasks has reference "
                          "actions that solve it, so there is nothing to clone. Leave it unset to warm-start on the seed pool.")
    short = f" ({len(tasks)} of the first {n} have reference actions that solve them)" if len(tasks) < n else ""
    log(f"warm start on the reference actions of the first {len(tasks)} train tasks{short} ...")
    return tasks


def _report_duplicates(offered: list[Task], admitted: list[Task], store: RunStore, *, log: Callable[[str], None]) -> None:
    """Say which seed tasks the pool refused as duplicates (the same request and reference
    actions as an earlier task, or an id already taken): a train split that repeats itself is
    smaller than it looks, and the user should hear it."""
    kept = {t.id for t in admitted}
    dropped = [t.id for t in offered if t.id not in kept]
    if not dropped:
        return
    shown = ", ".join(dropped[:10]) + (f" and {len(dropped) - 10} more" if len(dropped) > 10 else "")
    text = (f"{len(dropped)} of {len(offered)} seed tasks left out of the pool as duplicates of earlier ones (the same request "
            f"and reference actions, or the same id): {shown}. Make them differ, or expect a smaller seed pool.")
    log("WARNING: " + text)
    store.add_note(0, "seed_tasks_duplicate", text)


def check_seed_tasks(make_env: Callable[[], AgentEnv], tasks: list[Task], store: RunStore, *,
                     log: Callable[[str], None], progress: Callable[[str, int, int], None]) -> list[Task]:
    env = make_env()
    try:
        return _check(env, tasks, store, log=log, progress=progress)
    finally:
        env.close()


def _check(env: AgentEnv, tasks: list[Task], store: RunStore, *, log: Callable[[str], None],
           progress: Callable[[str, int, int], None], demos: bool = False) -> list[Task]:
    """The tasks that pass (``demos``: the warm start's demonstrations beyond the seed pool, said so
    in the messages; an empty result is then left to the caller)."""
    what, where = ("warm-start demonstrations", "the warm start") if demos else ("seed tasks", "the pool")
    name = getattr(env, "name", type(env).__name__)
    good: list[Task] = []
    bad: list[str] = []
    if not is_task_list(tasks):
        raise not_tasks_error(env, "train", tasks)
    for i, t in enumerate(tasks):
        try:
            t.model_dump_json()
        except Exception as e:
            bad.append(f"{t.id}: its payload is not JSON ({type(e).__name__}: {e})")
            continue
        if not t.reference_actions:
            good.append(t)
            continue
        try:
            with blame(env, "replay", t):
                result = env.replay(t, t.reference_actions)
        except (GraderError, ToolReturnTypeError):  # a bug of the environment's code, not of this task: stop here
            raise
        except ComponentError as e:
            bad.append(f"{t.id}: replaying its reference actions raised {e.error} ({e.headline})")
            continue
        if result.success:
            good.append(t)
        else:
            why = f"; first error: {result.errors[0][:120]}" if result.errors else ""
            bad.append(f"{t.id}: its reference actions replay to score {result.score:.2f}, below the success threshold{why}")
        progress(f"checking {what}", i + 1, len(tasks))
    if bad:
        text = (f"{len(bad)} of {len(tasks)} {what} of environment '{name}' left out of {where}, because their reference "
                f"actions do not solve them (the warm start would imitate them): " + "; ".join(bad[:5])
                + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "") + ". Fix the tasks or the environment's grader.")
        log("WARNING: " + text)
        store.add_note(0, "warm_start_tasks_dropped" if demos else "seed_tasks_dropped", text)
    if tasks and not good and not demos:
        raise ConfigError(f"environment '{name}': none of its {len(tasks)} train tasks passes its own replay check, so there is "
                          f"no seed pool to train on: {bad[0]}")
    return good
