"""evolution.signal_order: which signals of a kind reach the teacher when a round holds more than
``max_signals_per_kind``. ``arrival`` (the paper) keeps the earliest; ``weakest`` keeps those of
the tasks the agent solved least often in its training rollouts since the round's oldest signal.
What a user relies on: the teacher is handed exactly those signals, per kind, ties in arrival
order; and a round cut short by a stop and run again on resume is handed the same ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevolve_sdk.evolution.scheduler import EvolutionScheduler
from coevolve_sdk.records import Signal, Step, Trajectory
from coevolve_sdk.storage.store import RunStore
from tests.warehouse.scheduler_kit import random_scheduler

# per seed task: successes of its 4 training rollouts at step 5
WINS = [3, 2, 3, 1, 2, 3]
BOUNDARY = [0, 1, 2, 3, 4, 5]  # tasks with a boundary signal, in the order they were detected
FORGETTING = [0, 2, 4]


def _scheduler(tmp_path: Path, order: str) -> tuple[EvolutionScheduler, RunStore]:
    return random_scheduler(tmp_path / "run.sqlite", steps=10, seed_tasks=len(WINS), every=5, guidance="signals",
                            max_signals_per_kind=2, signal_order=order)


def _record_step(sched: EvolutionScheduler, store: RunStore) -> list[Signal]:
    tasks = sched.pool.tasks
    trajs: list[Trajectory] = []
    for i, task in enumerate(tasks):
        for k in range(4):
            trajs.append(Trajectory(id=f"tr-{i}-{k}", task_id=task.id, step=5, success=k < WINS[i], score=float(k < WINS[i]),
                                    steps=[Step(action=a, observation="") for a in task.reference_actions]))
    signals = [Signal(id=f"b-{i}", kind="boundary", task_id=tasks[i].id, trajectory_id=f"tr-{i}-0", step=5) for i in BOUNDARY]
    signals += [Signal(id=f"f-{i}", kind="forgetting", task_id=tasks[i].id, trajectory_id=f"tr-{i}-3", step=5)
                for i in FORGETTING]
    store.record_step(5, trajs, signals)
    return signals


def _handed(sched: EvolutionScheduler) -> list[str]:
    """Record which signals the teacher reflects on, in order (one worker: the round's order)."""
    seen: list[str] = []
    reflect = sched.evolver.teacher.reflect

    def recording(signal, trajectory, task):  # type: ignore[no-untyped-def]
        seen.append(signal.id)
        return reflect(signal, trajectory, task)

    sched.evolver.teacher.reflect = recording  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize(("order", "expected"), [
    ("arrival", ["b-0", "b-1", "f-0", "f-2"]),
    # boundary: task 3 (1 of 4) first, then tasks 1 and 4 (2 of 4) in arrival order; forgetting: task 4, then 0 before 2
    ("weakest", ["b-3", "b-1", "f-4", "f-0"]),
])
def test_the_teacher_is_handed_the_signals_the_order_names(tmp_path: Path, order: str, expected: list[str]) -> None:
    sched, store = _scheduler(tmp_path, order)
    signals = _record_step(sched, store)
    seen = _handed(sched)
    sched.offer(signals, [], 5)
    sched.poll(5)
    assert sorted(seen, key=lambda s: s[0]) == sorted(expected, key=lambda s: s[0])
    assert [s for s in seen if s.startswith("b")] == [s for s in expected if s.startswith("b")]
    assert [s for s in seen if s.startswith("f")] == [s for s in expected if s.startswith("f")]


def test_a_round_run_again_after_a_stop_is_handed_the_same_signals(tmp_path: Path) -> None:
    whole, store = _scheduler(tmp_path / "whole", "weakest")
    signals = _record_step(whole, store)
    expected = _handed(whole)
    whole.offer(signals, [], 5)
    whole.poll(5)

    stopped, store = _scheduler(tmp_path / "stopped", "weakest")
    signals = _record_step(stopped, store)
    stopped._launch = lambda *a, **k: None  # type: ignore[method-assign]  # the process dies once the round has started
    stopped.offer(signals, [], 5)
    assert store.round_start(1) is not None and store.round_result(1) is None

    store.close()
    resumed, _ = _scheduler(tmp_path / "stopped", "weakest")  # a new process on the same run folder
    seen = _handed(resumed)
    resumed.recover({"round": 1, "running": [{"round": 1, "step": 5, "admit_at": 5}]})
    resumed.poll(5)
    assert seen == expected and len(seen) == 4
