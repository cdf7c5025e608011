"""Issue 19 (1f): one seed gives one result, whatever ``evolution.workers`` is.

Two workers used to settle duplicate proposals in completion order (whichever signal's thread
finished first admitted the task), so reruns of one seed differed. Now each signal explores
with a stream of its own and the round settles its signals in signal order."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from coevolve_sdk.config import RunConfig
from coevolve_sdk.evolution.rounds import Evolver
from coevolve_sdk.run.loop import CoEvolveLoop
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.evolution.validation import Validator
from coevolve_warehouse.env import WarehouseEnv
from tests.core.test_loop_cli import TOY
from tests.warehouse.scheduler_kit import boundary_signals


class SameProposalsSlowFirst(RandomExplorer):
    """Every signal explores alike (so signals propose the same tasks), and the earlier a
    signal's task in the list, the longer its exploration takes: with two workers the later
    signals finish first."""

    name = "same-proposals-slow-first"
    order: list[str] = []

    def explore(self, env, task, context, seed=0):  # type: ignore[no-untyped-def]
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.05 * (len(self.order) - self.order.index(context.summary)))
        return super().explore(env, task, context, seed=0)

    def reflect(self, signal, trajectory, task):  # type: ignore[no-untyped-def]
        return super().reflect(signal, trajectory, task).model_copy(update={"summary": signal.id})


def _round(tmp_path: Path, workers: int) -> list[tuple[str, str, str | None]]:
    first = WarehouseEnv().tasks("train")[0]
    bases = [first.model_copy(update={"id": f"{first.id}-copy-{i}"}) for i in range(4)]  # one state, four tasks
    store = RunStore(tmp_path / f"w{workers}.sqlite")
    teacher = SameProposalsSlowFirst(SameProposalsSlowFirst.Options(rounds=2, steps_per_round=3, max_actions=3, max_candidates=2))
    evolver = Evolver(teacher, Validator(), WarehouseEnv, store, workers=workers, max_signals_per_kind=None, seed=4)
    signals, trajs = boundary_signals(bases)
    teacher.order = [s.id for s in signals]
    res = evolver.run_round(1, 1, signals, trajs, {b.id: b for b in bases}, set())
    assert res.accepted, res.summary()
    return [(t.id, t.query, t.lineage.signal_id if t.lineage else None) for t in res.accepted]


def test_duplicate_proposals_go_to_the_first_signal_whatever_the_workers(tmp_path: Path) -> None:
    one, two = _round(tmp_path, 1), _round(tmp_path, 2)
    assert one == two
    assert {sid for _, _, sid in one} == {"sig-0"}  # the others proposed the same tasks: duplicates


def _run(tmp_path: Path, workers: int) -> tuple[list[object], list[object], list[object]]:
    cfg = json.loads(json.dumps(TOY))
    cfg.update(run_dir=str(tmp_path / f"run-{workers}"), seed=7)
    cfg["training"].update(steps=6, checkpoint_every=3)
    cfg["pool"] = {"seed_tasks": 6, "seed_source": "explore"}
    cfg["teacher"] = {"name": "random-explorer", "options": {"rounds": 2, "steps_per_round": 3, "max_actions": 3}}
    cfg["evolution"] = {"every": 2, "guidance": "random", "random_starts": 4, "max_admitted_per_round": 3, "workers": workers}
    CoEvolveLoop(RunConfig.model_validate(cfg)).run()
    con = sqlite3.connect(tmp_path / f"run-{workers}" / "run.sqlite")
    try:
        tasks = con.execute("SELECT id, origin, fingerprint, step_admitted FROM tasks ORDER BY seq").fetchall()
        evals = [(p, s, json.loads(d)["success_rate"], json.loads(d)["mean_score"]) for p, s, d in
                 con.execute("SELECT phase, step, data FROM evals ORDER BY id")]
        metrics = con.execute("SELECT step, key, value FROM metrics WHERE key NOT LIKE 'time/%' AND key NOT LIKE '%seconds%' ORDER BY step, key").fetchall()
    finally:
        con.close()
    return tasks, evals, metrics


def test_a_short_run_is_the_same_with_one_or_two_evolution_workers(tmp_path: Path) -> None:
    tasks1, evals1, metrics1 = _run(tmp_path, 1)
    tasks2, evals2, metrics2 = _run(tmp_path, 2)
    assert any(origin == "synthetic" for _, origin, _, _ in tasks1), "no round admitted anything: the test shows nothing"
    assert tasks1 == tasks2
    assert evals1 == evals2 and evals1
    assert metrics1 == metrics2
