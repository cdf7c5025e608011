"""An evolution round on the warehouse: under an admission cap every signal kind keeps a share."""

from __future__ import annotations

from pathlib import Path

from coevolve_sdk.evolution.rounds import Evolver
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.records import Signal, Step, Trajectory
from coevolve_sdk.evolution.validation import Validator
from coevolve_warehouse.env import WarehouseEnv


def test_an_admission_cap_takes_turns_between_kinds_and_signals(tmp_path: Path) -> None:
    env = WarehouseEnv()
    tasks = env.tasks("train")[:6]
    store = RunStore(tmp_path / "run.sqlite")
    teacher = RandomExplorer(RandomExplorer.Options(rounds=3, steps_per_round=3, max_actions=3, max_candidates=3))
    evolver = Evolver(teacher, Validator(), WarehouseEnv, store, workers=1, max_admitted=3, max_signals_per_kind=None)
    signals, trajs = [], {}
    for i, t in enumerate(tasks):
        tr = Trajectory(task_id=t.id, steps=[Step(action=a, observation="") for a in t.reference_actions[:-1]])
        trajs[tr.id] = tr
        signals.append(Signal(kind="boundary" if i < 4 else "rare", task_id=t.id, trajectory_id=tr.id, step=1))
    res = evolver.run_round(1, 1, signals, trajs, {t.id: t for t in tasks}, set())
    assert res.over_budget > 0 and len(res.accepted) == 3
    kinds = [t.lineage.signal_kind for t in res.accepted]
    sources = [t.lineage.signal_id for t in res.accepted]
    # the first task of three different signals, the kinds in turn: boundary, rare, boundary
    assert len(set(sources)) == 3 and kinds == ["boundary", "rare", "boundary"], kinds
