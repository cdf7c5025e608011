"""RandomExplorer's ``compose``: joining the signalled behaviour with another start task's, so that
two skills the pool holds only apart meet in one proposed request (issue 19: the weakest dev
composition, move+move_all, was admitted by no arm, since no pool task and seldom a random walk
strings the two together)."""

from __future__ import annotations

import sqlite3
import json
from pathlib import Path

import numpy as np
import pytest

from coevolve_sdk.env.actions import calls_in
from coevolve_sdk.evolution.rounds import Evolver
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.evolution.validation import Validator
from coevolve_sdk.evolution.variation import vary_composed
from coevolve_sdk.records import Signal, Step, Trajectory
from coevolve_sdk.storage.store import RunStore
from coevolve_warehouse import world
from coevolve_warehouse.env import WarehouseEnv
from tests.warehouse.scheduler_kit import boundary_signals


@pytest.fixture(scope="module")
def env() -> WarehouseEnv:
    return WarehouseEnv()


def _one_skill(env: WarehouseEnv, skill: str, k: int = 0):  # type: ignore[no-untyped-def]
    return [t for t in env.tasks("train") if t.payload["skills"] == [skill]][k]


def test_a_composed_variation_strings_two_tasks_skills_together_on_one_state(env: WarehouseEnv) -> None:
    move, move_all = _one_skill(env, "move"), _one_skill(env, "move_all")
    made = 0
    for seed in range(10):
        steps = vary_composed(env, move, move.reference_actions, move_all, move_all.reference_actions,
                              np.random.default_rng(seed), distinct=True)
        assert [c.name for s in steps for c in calls_in(s.action)] == ["move", "count", "move"]
        if not all(s.ok for s in steps):
            continue  # a drawn pile can be gone after the first move: that variation is no task
        # the partner's copied count is copied again from this episode's own count
        counted = int(steps[1].observation)
        assert calls_in(steps[2].action)[0].arguments["n"] == counted
        query = env.describe(move, [Step(action=s.action, observation=s.observation) for s in steps])
        assert world.skills_of(query) == ["move", "move_all"], query
        made += 1
    assert made >= 5


def test_the_explorer_proposes_the_composition_and_names_its_partner(env: WarehouseEnv) -> None:
    move, move_all = _one_skill(env, "move"), _one_skill(env, "move_all")
    teacher = RandomExplorer(RandomExplorer.Options(rounds=2, steps_per_round=4, max_actions=4, max_candidates=2,
                                                    variation=1.0, variation_alone=True, compose=1.0))
    assert teacher.wants_partners
    found = []
    for seed in range(6):
        ctx = teacher.reflect(Signal(kind="boundary", task_id=move.id, trajectory_id="t", step=1), Trajectory(task_id=move.id), move)
        ctx.partners = [move, move_all]  # its own task is never its partner
        cands = teacher.abstract(env, move, teacher.explore(env, move, ctx, seed=seed), ctx, set())
        found += [c for c in cands if world.skills_of(c.query) == ["move", "move_all"]]
    assert found, "no move+move_all proposal"
    for c in found:
        assert c.exploration["composed_with"] == move_all.id and move_all.id in c.description
        task = env.make_task(c, move)  # a real task of the world: validated by execution on the parent's stock
        assert env.replay(task, task.reference_actions).score == 1.0
    # the stored context never carries the partner tasks
    assert "partners" not in ctx.model_dump()


def test_without_compose_partners_change_nothing(env: WarehouseEnv) -> None:
    """compose=0 (the default) explores exactly as before, partners or not: same random draws."""
    move, take = _one_skill(env, "move"), _one_skill(env, "take")
    teacher = RandomExplorer(RandomExplorer.Options(rounds=2, steps_per_round=4, variation=0.5))
    assert not teacher.wants_partners
    sig = Signal(kind="boundary", task_id=move.id, trajectory_id="t", step=1)
    bare = teacher.reflect(sig, Trajectory(task_id=move.id), move)
    with_partners = bare.model_copy(update={"partners": [take]})
    runs = [[t.action for t in teacher.explore(env, move, ctx, seed=3)] for ctx in (bare, with_partners)]
    assert runs[0] == runs[1]


def test_a_round_hands_each_signal_the_other_signalled_tasks(tmp_path: Path, env: WarehouseEnv) -> None:
    """In a guided round the partners are the round's other signalled tasks (never the signal's
    own task), the composed tasks' lineage names them, and the result is the same with one or
    two workers."""
    bases = [_one_skill(env, "move", 0), _one_skill(env, "move_all", 0), _one_skill(env, "take", 0), _one_skill(env, "move_all", 1)]
    seen_partners: list[tuple[str, list[str]]] = []

    class Recording(RandomExplorer):
        name = "recording-composer"

        def explore(self, env, task, context, seed=0):  # type: ignore[no-untyped-def]
            seen_partners.append((task.id, [p.id for p in context.partners]))
            return super().explore(env, task, context, seed=seed)

    def one_round(workers: int) -> list[tuple[str, str, str]]:
        store = RunStore(tmp_path / f"w{workers}.sqlite")
        teacher = Recording(Recording.Options(rounds=2, steps_per_round=4, max_actions=4, max_candidates=2,
                                              variation=1.0, variation_alone=True, compose=0.5))
        evolver = Evolver(teacher, Validator(), WarehouseEnv, store, workers=workers, max_signals_per_kind=None, seed=7)
        signals, trajs = boundary_signals(bases)
        res = evolver.run_round(1, 1, signals, trajs, {b.id: b for b in bases}, set())
        con = sqlite3.connect(tmp_path / f"w{workers}.sqlite")
        try:
            stored = [json.loads(d) for (d,) in con.execute("SELECT data FROM tasks")]
        finally:
            con.close()
        for t in stored:  # what the store keeps of the context has no partner tasks in it
            assert "partners" not in json.dumps(t.get("lineage") or {})
        return [(t.query, t.lineage.parent_task_id, t.lineage.exploration.get("composed_with", "")) for t in res.accepted]

    one = one_round(1)
    ids = [b.id for b in bases]
    for own, partners in seen_partners:
        assert own not in partners and partners == [i for i in ids if i != own]
    composed = [(q, parent, partner) for q, parent, partner in one if partner]
    assert composed, one
    assert all(partner in ids and partner != parent for _, parent, partner in composed)
    assert one_round(2) == one
