"""Issue 19 (1c): no evolution round whose tasks would join the pool after the last training
step (nothing would train on them, yet an arm's admitted count would include them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevolve_sdk.config import Component, RunConfig
from coevolve_sdk.pool import TaskPool
from coevolve_sdk.scheduler import EvolutionScheduler
from coevolve_sdk.store import RunStore
from coevolve_sdk.teacher import RandomExplorer
from coevolve_warehouse.env import WarehouseEnv


def _rounds_started(tmp_path: Path, mode: str, lag: int, steps: int, every: int) -> list[int]:
    cfg = RunConfig(run_dir=str(tmp_path), environment=Component(name="warehouse"), policy=Component(name="tiny"),
                    algorithm=Component(name="grpo"), training={"steps": steps},  # type: ignore[arg-type]
                    evolution={"every": every, "mode": mode, "async_lag": lag, "guidance": "random", "random_starts": 1,
                               "workers": 1})  # type: ignore[arg-type]
    store = RunStore(tmp_path / f"{mode}-{lag}.sqlite")
    pool = TaskPool(store)
    pool.admit([t.model_copy(update={"origin": "seed"}) for t in WarehouseEnv().tasks("train")[:4]], step=0)
    teacher = RandomExplorer(RandomExplorer.Options(rounds=1, steps_per_round=3, max_actions=3, max_candidates=1))
    sched = EvolutionScheduler.for_run(cfg, teacher, WarehouseEnv, store, pool, [], log=lambda m: None,
                                       on_admitted=lambda s, t: None, on_proposed=lambda s, c: None)
    for step in range(1, steps + 1):
        sched.poll(step)
        sched.offer([], [], step)
        sched.poll(step, final=step == steps)
    return [rd["step"] for rd in store.rounds()]


@pytest.mark.parametrize("mode,lag,expected", [("sync", 1, [5]), ("async", 1, [5]), ("async", 5, [])])
def test_no_round_after_the_last_training_step(tmp_path: Path, mode: str, lag: int, expected: list[int]) -> None:
    # steps 10, a round due every 5 steps: the one at step 10 (sync) or admitted after step 10 (async) never starts
    assert _rounds_started(tmp_path, mode, lag, steps=10, every=5) == expected
