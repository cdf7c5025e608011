"""Issue 19 (1c): no evolution round whose tasks would join the pool after the last training
step (nothing would train on them, yet an arm's admitted count would include them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .scheduler_kit import random_scheduler


def _rounds_started(tmp_path: Path, mode: str, lag: int, steps: int, every: int) -> list[int]:
    sched, store = random_scheduler(tmp_path / f"{mode}-{lag}.sqlite", steps=steps, seed_tasks=4, every=every, mode=mode,
                                    async_lag=lag, random_starts=1)
    for step in range(1, steps + 1):
        sched.poll(step)
        sched.offer([], [], step)
        sched.poll(step, final=step == steps)
    return [rd["step"] for rd in store.rounds()]


@pytest.mark.parametrize("mode,lag,expected", [("sync", 1, [5]), ("async", 1, [5]), ("async", 5, [])])
def test_no_round_after_the_last_training_step(tmp_path: Path, mode: str, lag: int, expected: list[int]) -> None:
    # steps 10, a round due every 5 steps: the one at step 10 (sync) or admitted after step 10 (async) never starts
    assert _rounds_started(tmp_path, mode, lag, steps=10, every=5) == expected
