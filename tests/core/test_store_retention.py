"""store.keep_trajectory_steps: the training trajectories of old steps lose their turns, except those
a signal or a task's lineage points to, and evaluation trajectories; every row (score, success)
stays for the report; the store file stops growing. (That a resumed run prunes exactly what an
uninterrupted one does is checked by tests/core/test_disk_full.py, whose runs keep 2 steps.)"""

from __future__ import annotations

from pathlib import Path

from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Lineage, Signal, Task
from tests.core.test_store_compression import _chatty


def _step(store: RunStore, step: int, n: int = 8, turns: int = 12, evidence: bool = True) -> list[str]:
    trajs = [_chatty(step * 100 + i, turns).model_copy(update={"id": f"traj-{step}-{i}", "step": step}) for i in range(n)]
    # one signal per step, on its first trajectory, naming the second as further evidence
    sig = Signal(id=f"sig-{step}", kind="boundary", task_id=trajs[0].task_id, trajectory_id=trajs[0].id, step=step,
                 trajectory_ids=[trajs[1].id] if evidence else [])
    store.record_step(step, trajs, [sig], {"rollout/reward_mean": 0.5})
    return [t.id for t in trajs]


def _bytes(store: RunStore) -> int:
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store.path.stat().st_size


def test_old_trajectories_lose_their_turns_but_not_what_is_read_later(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite", keep_steps=3)
    ids = {s: _step(store, s) for s in (1, 2)}
    # a task admitted at step 2 from a trajectory of step 1 that no signal row names
    store.add_tasks([Task(id="task-seed", env="kvstore", query="q0", origin="seed"),  # no lineage
                     Task(id="task-new", env="kvstore", query="q", origin="synthetic",
                          lineage=Lineage(trajectory_id=ids[1][2], step_admitted=2))], step=2)
    store.record_eval(2, "during", "test", {"tasks": 1}, [_chatty(999).model_copy(update={"id": "eval-2", "step": 2})])
    ids |= {s: _step(store, s) for s in range(3, 7)}
    store.prune_trajectories(3)  # what a run resumed at step 6 does first

    def whole(tid: str) -> bool:
        t = store.get_trajectory(tid)
        assert t is not None, tid  # every row stays
        return bool(t.steps) and not t.info.get("pruned")

    for step in (1, 2, 3):  # 6 - 3: pruned, but for the signalled ones, the lineage's and the evaluation's
        kept = {i for i in ids[step] if whole(i)}
        assert kept == {ids[step][0], ids[step][1]} | ({ids[1][2]} if step == 1 else set()), (step, kept)
        stub = store.get_trajectory(ids[step][5])
        assert stub is not None and stub.step == step and stub.score == 0.5 and stub.success and stub.info == {"pruned": True}
    for step in (4, 5, 6):
        assert all(whole(i) for i in ids[step])
    assert whole("eval-2")
    # every row stays, with its score: the report's score per step reads every step still
    rows = store._query("SELECT step, COUNT(*), AVG(score) FROM trajectories WHERE phase = 'train' GROUP BY step")
    assert rows == [(s, 8, 0.5) for s in range(1, 7)]


def test_the_store_stops_growing(tmp_path: Path) -> None:
    def grow(keep: int | None) -> list[int]:
        # plain rows of a few kB, like a real run's compressed ones (these repetitive toy turns compress 20x)
        store = RunStore(tmp_path / f"run-{keep}.sqlite", compress=False, keep_steps=keep)
        sizes = []
        for s in range(1, 41):
            _step(store, s, n=16, turns=30, evidence=False)  # 1 of 16 trajectories signalled
            if s % 10 == 0:
                sizes.append(_bytes(store))
        store.close()
        return sizes

    everything, bounded = grow(None), grow(5)
    assert everything[-1] - everything[0] > 2 * (everything[1] - everything[0])  # all kept: linear in the steps
    # kept for 5 steps: after the first 10 steps only the small pruned rows and signalled trajectories add up
    assert bounded[-1] - bounded[0] < 0.2 * (everything[-1] - everything[0]), (bounded, everything)
