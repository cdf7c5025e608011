"""The run folder's parts, one at a time: rollback to a checkpoint, evaluation rows replaced,
the read-only store, damage detection, checkpoint manifests, the writer lock, config changes
on resume and reproducible ids. End-to-end tests through `coevolve run` live in
test_run_folder_cli.py and test_resume_exact.py."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from coevolve_sdk.storage.checkpoints import checkpoints_newest_first, set_aside, verify_checkpoint, write_checkpoint
from coevolve_sdk.config import RunConfig
from coevolve_sdk.errors import ConfigError
from coevolve_sdk.ids import id_stream, new_id
from coevolve_sdk.evolution.pool import TaskPool
from coevolve_sdk.components.registry import Registry
from coevolve_sdk.storage.run_folder import check_resume_config
from coevolve_sdk.storage.lock import RunFolderBusy, RunLock
from coevolve_sdk.storage.store import RunStore, StoreDamaged
from coevolve_sdk.records import Signal, Task, TeacherUsage, Trajectory
from tests.core.test_loop_cli import TOY


def _step(store: RunStore, step: int) -> list[Signal]:
    tr = Trajectory(task_id="t", score=1.0, step=step)
    sigs = [Signal(kind="k", task_id="t", trajectory_id=tr.id, step=step)]
    store.record_step(step, [tr], sigs, {"rollout/reward_mean": 1.0})
    return sigs


def test_rollback_removes_what_was_written_after_the_checkpoint(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    pool = TaskPool(store)
    pool.admit([Task(env="e", query="seed")], step=0)
    s1 = _step(store, 1)
    store.start_round(1, 1, "digest-1", False, [s.id for s in s1])
    store.record_round(1, 1, {"accepted_tasks": [], "accepted_ids": []})
    store.record_usage(1, 1, s1[0].id, [], TeacherUsage(calls=3, cost_usd=0.3))
    pool.admit([Task(env="e", query="from round 1")], step=2)
    _step(store, 2)
    at_checkpoint = store.max_task_seq()  # the checkpoint of step 2: 2 tasks, round 1
    s3 = _step(store, 3)
    store.record_eval(3, "during", "test", {"tasks": 1, "success_rate": 1.0, "mean_score": 1.0}, [Trajectory(task_id="x")])
    store.start_round(2, 3, "digest-2", False, [s.id for s in s3])
    store.record_round(2, 3, {"accepted_tasks": [{"env": "e", "query": "from round 2"}], "accepted_ids": ["t2"]})
    store.record_usage(3, 2, s3[0].id, ["t2"], TeacherUsage(calls=5, cost_usd=0.5))
    pool.admit([Task(env="e", query="from round 2")], step=3)
    store.record_eval(3, "after", "test", {"tasks": 1, "success_rate": 0.0, "mean_score": 0.0})

    removed = store.rollback(2, at_checkpoint, 1)
    assert removed["tasks"] == 1 and removed["rounds"] == 1
    assert [t.query for t in store.load_tasks()] == ["seed", "from round 1"]
    assert store.steps_done() == [1, 2] and store.evals() == []
    assert [r["round"] for r in store.rounds()] == [1] and store.round_start(2) is None
    # round 2's signals were of a step that is replayed; round 1's stay consumed by round 1
    assert [s.id for s in store.round_signals(1)] == [s1[0].id] and store.pending_signals()[0].step == 2
    # money spent is kept, marked as an attempt that was rolled back
    usage = store.usage_rows()
    assert [(u["calls"], u["rolled_back"]) for u in usage] == [(3, False), (5, True)]
    reusable = store.reusable_round(2, "digest-2")
    assert reusable is not None and reusable["accepted_ids"] == ["t2"] and store.reusable_round(2, "other") is None
    store.reuse_round(reusable["attempt"])
    assert [r["round"] for r in store.rounds()] == [1, 2] and not any(u["rolled_back"] for u in store.usage_rows())


def test_an_evaluation_replaces_its_rows_and_trajectories(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    for attempt in range(3):
        trajs = [Trajectory(task_id=f"t{i}", score=0.5) for i in range(2)]  # new random ids every attempt
        store.record_eval(0, "before", "test", {"tasks": 2, "success_rate": 0.0, "mean_score": 0.5, "attempt": attempt}, trajs)
    assert [e["attempt"] for e in store.evals()] == [2]
    con = sqlite3.connect(tmp_path / "run.sqlite")
    assert con.execute("SELECT COUNT(*) FROM trajectories WHERE phase = 'eval-before'").fetchone()[0] == 2


def test_read_only_store_reads_while_a_writer_writes_and_never_writes(tmp_path: Path) -> None:
    writer = RunStore(tmp_path / "run.sqlite")
    TaskPool(writer).admit([Task(env="e", query="q")], step=0)
    reader = RunStore(tmp_path / "run.sqlite", read_only=True)
    _step(writer, 1)
    assert reader.steps_done() == [1] and len(reader.load_tasks()) == 1
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.set_meta("x", 1)
    with pytest.raises(StoreDamaged, match="does not exist"):
        RunStore(tmp_path / "missing.sqlite", read_only=True)


def test_a_damaged_store_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    store = RunStore(db)
    TaskPool(store).admit([Task(env="e", query=f"q{i}" * 200) for i in range(200)], step=0)
    store.close()
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])  # truncated
    with pytest.raises(StoreDamaged, match="damaged or not a run store") as e:
        RunStore(db, check=True).load_tasks()
    assert "--restart" in str(e.value)
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreDamaged):
        RunStore(db, check=True)
    db.unlink()
    newer = RunStore(db)
    newer.set_meta("schema_version", 99)
    newer.close()
    with pytest.raises(StoreDamaged, match="newer coevolve-sdk"):
        RunStore(db)


def test_checkpoint_manifest_catches_every_kind_of_damage(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"

    def fill(folder: Path) -> None:
        (folder / "algorithm").mkdir()
        (folder / "algorithm" / "weights.bin").write_bytes(os.urandom(4096))

    for step in (2, 4):
        write_checkpoint(root, step, {"format": 2, "step": step}, fill, keep=5)
    assert [p.name for p in checkpoints_newest_first(root)] == ["step-000004", "step-000002"]
    newest = root / "step-000004"
    assert verify_checkpoint(newest) is None
    weights = newest / "algorithm" / "weights.bin"
    original = weights.read_bytes()
    weights.write_bytes(original[:100])
    assert "has 100 bytes" in (verify_checkpoint(newest) or "")
    weights.write_bytes(bytes(len(original)))
    assert "checksum" in (verify_checkpoint(newest) or "")
    weights.write_bytes(original)
    (newest / "state.json").write_text('{"step": 4, "format": 2, "edited": true}')
    assert "state.json" in (verify_checkpoint(newest) or "")
    (newest / "state.json").write_text("{not json")
    assert "state.json cannot be read" in (verify_checkpoint(newest) or "")
    assert set_aside(newest).name == "step-000004.damaged"
    assert [p.name for p in checkpoints_newest_first(root)] == ["step-000002"]
    assert (root / "latest").read_text() == "step-000002"


_HOLD = """
import sys, time
from coevolve_sdk.storage.lock import RunLock
RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_one_writer_per_run_folder_and_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy) as e:
            RunLock(tmp_path).acquire()
        assert f"process {holder.pid}" in str(e.value) and "-c" in str(e.value) and "coevolve run --resume" in str(e.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    lock = RunLock(tmp_path)
    lock.acquire()  # the operating system dropped the killed holder's lock
    assert lock.holder()["pid"] == os.getpid()
    lock.release()


def _cfg(**over: object) -> RunConfig:
    raw = json.loads(json.dumps(TOY)) | {"run_dir": "/tmp/x"}
    for k, v in over.items():
        cur = raw
        *parents, last = k.split(".")
        for p in parents:
            cur = cur.setdefault(p, {})
        cur[last] = v
    return RunConfig.model_validate(raw)


def test_config_changes_on_resume_are_recorded_or_refused(tmp_path: Path) -> None:
    reg = Registry(load_entry_points=False, extra_modules=["tests.core.toy_plugin"])
    stored = _cfg().model_dump(mode="json")
    allowed = _cfg(**{"training.steps": 30, "eval.max_tasks": 2, "algorithm.options.step_delay": 0.5})
    changes = check_resume_config(stored, allowed, reg, allow=False, source="cfg")
    assert sorted(c.split(":")[0] for c in changes) == ["algorithm.options.step_delay", "eval.max_tasks", "training.steps"]
    refused = _cfg(**{"seed": 5, "training.tasks_per_step": 2, "algorithm.options.lr": 0.1, "training.steps": 30})
    with pytest.raises(ConfigError) as e:
        check_resume_config(stored, refused, reg, allow=False, source="cfg")
    msg = str(e.value)
    assert "seed: 3 -> 5" in msg and "training.tasks_per_step: 4 -> 2" in msg and "algorithm.options.lr" in msg
    assert "training.steps" not in msg.split("Undo")[0] and "--allow-config-change" in msg
    assert len(check_resume_config(stored, refused, reg, allow=True, source="cfg")) == 4
    assert check_resume_config(stored, _cfg(), reg, allow=False, source="cfg") == []


def test_ids_repeat_in_a_named_stream_and_differ_without_one() -> None:
    def draw() -> list[str]:
        with id_stream("rollout", 0, 7):
            return [Trajectory(task_id="t").id, Signal(kind="k", task_id="t", trajectory_id="x", step=1).id, new_id("task")]

    first, again = draw(), draw()
    assert first == again and len(set(first)) == 3
    with id_stream("rollout", 0, 8):
        assert new_id("traj") != first[0]
    assert new_id("traj") != new_id("traj")
    seen: list[str] = []
    t = threading.Thread(target=lambda: seen.append(new_id("traj")))  # another thread: not the stream
    with id_stream("rollout", 0, 7):
        t.start()
        t.join()
    assert seen[0] != first[0]


def test_the_lock_holder_is_named_even_while_it_starts(tmp_path: Path) -> None:
    lock = RunLock(tmp_path)
    lock.acquire()
    try:
        info = json.loads((tmp_path / ".coevolve.lock").read_text())
        assert info["pid"] == os.getpid() and time.strptime(info["started"], "%Y-%m-%d %H:%M:%S")
    finally:
        lock.release()
