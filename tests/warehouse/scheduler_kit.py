"""A warehouse evolution scheduler for tests that drive rounds by hand: random guidance, one
worker, a RandomExplorer making at most one candidate per start, seed tasks from the train split.
Called again on the same file it reopens the store and pool as a resumed process would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevolve_sdk.config import ComponentConfig, RunConfig
from coevolve_sdk.evolution.pool import TaskPool
from coevolve_sdk.evolution.scheduler import EvolutionScheduler
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.records import Signal, Step, Task, Trajectory
from coevolve_warehouse.env import WarehouseEnv


def random_scheduler(db: Path, *, steps: int, seed_tasks: int, **evolution: Any) -> tuple[EvolutionScheduler, RunStore]:
    cfg = RunConfig(run_dir=str(db.parent), environment=ComponentConfig(name="warehouse"), policy=ComponentConfig(name="tiny"),
                    algorithm=ComponentConfig(name="grpo"), training={"steps": steps},  # type: ignore[arg-type]
                    evolution={"guidance": "random", "workers": 1, **evolution})  # type: ignore[arg-type]
    fresh = not db.exists()
    store = RunStore(db)
    pool = TaskPool(store)
    if fresh:
        pool.admit([t.model_copy(update={"origin": "seed"}) for t in WarehouseEnv().tasks("train")[:seed_tasks]], step=0)
    teacher = RandomExplorer(RandomExplorer.Options(rounds=1, steps_per_round=3, max_actions=3, max_candidates=1))
    sched = EvolutionScheduler.for_run(cfg, teacher, WarehouseEnv, store, pool, [], log=lambda m: None,
                                       on_admitted=lambda s, t: None, on_proposed=lambda s, c: None)
    return sched, store


def boundary_signals(bases: list[Task]) -> tuple[list[Signal], dict[str, Trajectory]]:
    """One boundary signal per base task (ids ``sig-0``, ``sig-1``, ...), each on a trajectory of
    the task's own reference actions: the input of a hand-built evolution round."""
    signals, trajs = [], {}
    for i, base in enumerate(bases):
        tr = Trajectory(task_id=base.id, steps=[Step(action=a, observation="") for a in base.reference_actions])
        trajs[tr.id] = tr
        signals.append(Signal(id=f"sig-{i}", kind="boundary", task_id=base.id, trajectory_id=tr.id, step=1))
    return signals, trajs
