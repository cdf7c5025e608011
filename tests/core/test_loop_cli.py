"""End-to-end: `coevolve run` as a user runs it, killed with SIGKILL and resumed."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import coevolve_cmd

TOY = {
    "seed": 3,
    "plugins": ["tests.core.toy_plugin"],
    "environment": {"name": "kvstore", "options": {"train_tasks": 8, "test_tasks": 4, "max_steps": 4}},
    "policy": {"name": "toy-menu"},
    "algorithm": {"name": "toy-reinforce", "options": {"lr": 2.0}},
    "detectors": [{"name": "toy-mixed"}],
    "teacher": {"name": "random-explorer"},
    "rollout": {"group_size": 4},
    "training": {"steps": 12, "tasks_per_step": 4, "checkpoint_every": 1},
    "evolution": {"every": 2},
    "pool": {"seed_tasks": 8, "seed_source": "env"},
}


def write_config(tmp: Path, **over: object) -> Path:
    cfg = json.loads(json.dumps(TOY))
    cfg["run_dir"] = str(tmp / "run")
    for k, v in over.items():
        cur = cfg
        parts = k.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = v
    path = tmp / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _wait_for(cond, what: str, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()[1][-3000:]}"
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"timed out waiting for {what}")


def _db_rows(db: Path, sql: str) -> list[tuple]:
    try:
        return rows(db, sql) if db.exists() else []
    except sqlite3.OperationalError:  # the run has not created its tables yet
        return []


def test_run_writes_a_complete_run_folder(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 6})
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg)], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "step    6" in out.stdout
    run = tmp_path / "run"
    db = run / "run.sqlite"
    assert [r[0] for r in rows(db, "SELECT DISTINCT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")] == list(range(1, 7))
    assert rows(db, "SELECT COUNT(*) FROM signals")[0][0] > 0
    phases = {r[0] for r in rows(db, "SELECT phase FROM evals")}
    assert phases == {"before", "after"}
    assert (run / "report.html").exists()
    assert (run / "checkpoints" / "latest").read_text() == "step-000006"
    assert (run / "toy-algorithm-closed").read_text() == "6"  # closed once training was over


def test_sigkill_then_resume_loses_nothing(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"algorithm.options.step_delay": 0.4})
    run = tmp_path / "run"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)
    latest = run / "checkpoints" / "latest"
    deadline = time.time() + 120
    while time.time() < deadline and not latest.exists():
        time.sleep(0.05)
    assert latest.exists(), "the run wrote no checkpoint"
    time.sleep(0.9)  # let it get into a later step, possibly mid-write
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    db = run / "run.sqlite"
    tasks_before = {r[0] for r in rows(db, "SELECT id FROM tasks")}
    ckpt_step = int((run / "checkpoints" / "latest").read_text().split("-")[1])
    assert 1 <= ckpt_step < 12
    steps_before = [r[0] for r in rows(db, "SELECT DISTINCT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")]
    assert steps_before[: ckpt_step] == list(range(1, ckpt_step + 1))

    out = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run)], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    assert f"resumed from step-{ckpt_step:06d}" in out.stdout
    first_step_line = next(line for line in out.stdout.splitlines() if line.startswith("step "))
    assert first_step_line.split()[1] == str(ckpt_step + 1)
    steps_after = [r[0] for r in rows(db, "SELECT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")]
    assert steps_after == list(range(1, 13))  # every step exactly once
    tasks_after = {r[0] for r in rows(db, "SELECT id FROM tasks")}
    assert tasks_before <= tasks_after  # no admitted task lost
    assert rows(db, "SELECT value FROM meta WHERE key='status'")[0][0] == '"finished"'


def test_starting_over_an_existing_run_is_refused(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 1})
    first = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert again.returncode == 2
    assert "--resume" in again.stderr


def test_resume_before_the_first_checkpoint_starts_over_keeping_the_pool(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.checkpoint_every": 50, "training.steps": 30, "algorithm.options.step_delay": 0.3})
    run = tmp_path / "run"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)
    db = run / "run.sqlite"
    # The database file appears a moment before its tables do, so poll with the tolerant reader.
    _wait_for(lambda: (_db_rows(db, "SELECT COUNT(*) FROM metrics WHERE key='rollout/reward_mean'") or [(0,)])[0][0] >= 2, "two steps", proc, timeout=120)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    tasks_before = {r[0] for r in rows(db, "SELECT id FROM tasks")}
    assert not (run / "checkpoints" / "latest").exists()
    out = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "--set", "training.steps=3"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "training starts again from step 0" in out.stdout
    assert [r[0] for r in rows(db, "SELECT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")] == [1, 2, 3]
    assert tasks_before <= {r[0] for r in rows(db, "SELECT id FROM tasks")}


def test_resume_of_a_folder_without_checkpoint_explains(tmp_path: Path, sub_env: dict[str, str]) -> None:
    out = subprocess.run([*coevolve_cmd(), "run", "--resume", str(tmp_path)], capture_output=True, text=True, env=sub_env, timeout=60)
    assert out.returncode == 2
    assert "not a run folder" in out.stderr


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_evolution_admits_tasks_with_lineage(tmp_path: Path, sub_env: dict[str, str], mode: str) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 6, "evolution.mode": mode})
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr
    run = tmp_path / "run"
    synth = rows(run / "run.sqlite", "SELECT id, data FROM tasks WHERE origin='synthetic'")
    assert synth, "no synthetic task was admitted"
    lineage = json.loads(synth[0][1])["lineage"]
    assert lineage["signal_kind"] == "mixed" and lineage["trajectory_id"] and lineage["parent_task_id"]
    assert lineage["validation"]["replay_score"] == 1.0
    shown = subprocess.run([*coevolve_cmd(), "pool", "show", str(run), synth[0][0]], capture_output=True, text=True, env=sub_env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    for needle in ("signal", "trajectory", "teacher random-explorer", "prompt version random-v1", "exploration", "validation"):
        assert needle in shown.stdout
    exported = tmp_path / "pool.jsonl"
    ex = subprocess.run([*coevolve_cmd(), "pool", "export", str(run), str(exported)], capture_output=True, text=True, env=sub_env, timeout=60)
    assert ex.returncode == 0
    lines = exported.read_text().splitlines()
    assert len(lines) == rows(run / "run.sqlite", "SELECT COUNT(*) FROM tasks")[0][0]


def test_ctrl_c_says_how_to_resume(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 30, "algorithm.options.step_delay": 0.3})
    run = tmp_path / "run"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "checkpoints" / "latest").exists():
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}"
    assert f"coevolve run --resume {run}" in err and "Traceback" not in err


def test_ctrl_c_swallowed_by_a_finaliser_still_stops_the_run(tmp_path: Path, sub_env: dict[str, str]) -> None:
    # Python drops a KeyboardInterrupt raised inside __del__ ("Exception ignored"); the run must
    # stop anyway, at the end of the step in which Ctrl-C was pressed, and resume from there.
    cfg = write_config(tmp_path, **{"training.steps": 6, "algorithm.options.ctrl_c_in_finaliser_at": 3})
    run = tmp_path / "run"
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg)], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 130, f"stdout:\n{out.stdout[-2000:]}\nstderr:\n{out.stderr[-4000:]}"
    assert "Exception ignored" in out.stderr and f"coevolve run --resume {run}" in out.stderr
    steps = [r[0] for r in rows(run / "run.sqlite", "SELECT DISTINCT step FROM metrics WHERE key = 'rollout/reward_mean' ORDER BY step")]
    assert steps == [1, 2, 3]
    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "-q", "--set", "algorithm.options.ctrl_c_in_finaliser_at=0"],
                             capture_output=True, text=True, env=sub_env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    steps = [r[0] for r in rows(run / "run.sqlite", "SELECT DISTINCT step FROM metrics WHERE key = 'rollout/reward_mean' ORDER BY step")]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_kill_during_a_background_round_runs_it_again_from_its_signals(tmp_path: Path, sub_env: dict[str, str]) -> None:
    from coevolve_sdk.storage.checkpoints import latest_checkpoint, read_state

    gate = tmp_path / "gate"  # exploration waits for this file: round 1 is certainly still running
    # async, lag 1: round 1 starts at step 2 and must join the pool before step 4 samples, so the
    # run waits there for the gate; the checkpoint of step 3 records the round as running
    cfg = write_config(tmp_path, **{"training.steps": 8, "evolution.mode": "async",
                                    "teacher": {"name": "toy-gated-explorer", "options": {"gate": str(gate)}}})
    run = tmp_path / "run"
    db = run / "run.sqlite"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)

    def at_step_3() -> bool:
        ckpt = latest_checkpoint(run / "checkpoints")
        return ckpt is not None and read_state(ckpt)["step"] >= 3

    _wait_for(at_step_3, "the checkpoint of step 3", proc)
    time.sleep(0.5)
    proc.kill()
    proc.wait(timeout=60)
    state = read_state(latest_checkpoint(run / "checkpoints"))
    assert state["step"] == 3, "the run did not wait for round 1 before step 4"
    assert state["evolution"]["running"] == [{"round": 1, "step": 2, "admit_at": 4}]
    # the store, not the checkpoint, says which signals round 1 consumed
    consumed = {r[0] for r in rows(db, "SELECT id FROM signals WHERE round = 1")}
    assert consumed and not rows(db, "SELECT * FROM signals WHERE round IS NULL AND step <= 2")
    assert not rows(db, "SELECT * FROM teacher_usage")  # the teacher never finished a signal

    gate.write_text("open")
    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run)], capture_output=True, text=True, env=sub_env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "round 1 was cut short by the stop" in resumed.stdout
    used = {r[0] for r in rows(db, "SELECT signal_id FROM teacher_usage WHERE round = 1")}
    assert used and used <= consumed  # round 1 ran again, from the signals it had consumed
    synth = rows(db, "SELECT data, step_admitted FROM tasks WHERE origin='synthetic'")
    assert any(json.loads(d)["lineage"]["signal_id"] in consumed for d, _ in synth)
    assert {s for _, s in synth if s is not None} <= {4, 6, 8}  # admitted at fixed steps, round r's at 2r + 2


def test_kill_after_a_background_round_finished_admits_its_tasks_without_paying_again(
        tmp_path: Path, sub_env: dict[str, str]) -> None:
    # Round 1 starts at step 2 and waits for the gate. The test opens it once the checkpoint of
    # step 2 (which records the round as running) is written, while step 3 sleeps in its (slow)
    # update, so the round finishes while the step still runs; the run is killed before step 4
    # admits the round's tasks.
    from coevolve_sdk.storage.checkpoints import latest_checkpoint, read_state

    gate = tmp_path / "gate"
    cfg = write_config(tmp_path, **{"training.steps": 6, "evolution.mode": "async", "algorithm.options.step_delay": 3.0,
                                    "teacher": {"name": "toy-gated-explorer", "options": {"gate": str(gate)}}})
    run = tmp_path / "run"
    db = run / "run.sqlite"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)

    def round_1_running_at_a_checkpoint() -> bool:
        ckpt = latest_checkpoint(run / "checkpoints")
        return ckpt is not None and any(r["round"] == 1 for r in read_state(ckpt).get("evolution", {}).get("running", []))

    _wait_for(round_1_running_at_a_checkpoint, "a checkpoint with round 1 running", proc)
    gate.write_text("open")
    _wait_for(lambda: bool(_db_rows(db, "SELECT round FROM rounds WHERE round = 1")), "round 1 to finish", proc)
    proc.kill()
    proc.wait(timeout=60)
    (data,) = rows(db, "SELECT data FROM rounds WHERE round = 1")[0]
    validated = json.loads(data)["accepted_ids"]
    assert validated, "round 1 validated no task: the test proves nothing"
    assert not rows(db, "SELECT id FROM tasks WHERE origin='synthetic'"), "killed too late: round 1 was already admitted"
    paid = rows(db, "SELECT COUNT(*) FROM teacher_usage WHERE round = 1")[0][0]

    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "--set", "algorithm.options.step_delay=0"],
                             capture_output=True, text=True, env=sub_env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "round 1 had finished before the stop" in resumed.stdout
    admitted = {r[0]: r[1] for r in rows(db, "SELECT id, step_admitted FROM tasks WHERE origin='synthetic'")}
    assert set(validated) <= set(admitted) and {admitted[t] for t in validated} == {4}
    # admitted from the store, not explored again: round 1's teacher bill is what it was
    assert rows(db, "SELECT COUNT(*) FROM teacher_usage WHERE round = 1")[0][0] == paid


def test_a_round_rolled_back_before_any_checkpoint_is_reused_not_paid_again(tmp_path: Path, sub_env: dict[str, str]) -> None:
    # As above, but no checkpoint exists yet: everything after the seed pool is rolled back and
    # step 1 is replayed. The replayed round 1 has the same inputs as the rolled-back one, so
    # that round's result is reused instead of paying the teacher again.
    gate = tmp_path / "gate"
    cfg = write_config(tmp_path, **{"training.steps": 6, "training.checkpoint_every": 50, "evolution.mode": "async",
                                    "algorithm.options.step_delay": 3.0,
                                    "teacher": {"name": "toy-gated-explorer", "options": {"gate": str(gate)}}})
    run = tmp_path / "run"
    db = run / "run.sqlite"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)
    _wait_for(lambda: bool(_db_rows(db, "SELECT step FROM round_starts WHERE round = 1")), "round 1 to start", proc)
    gate.write_text("open")
    _wait_for(lambda: bool(_db_rows(db, "SELECT round FROM rounds WHERE round = 1")), "round 1 to finish", proc)
    proc.kill()
    proc.wait(timeout=60)
    assert not (run / "checkpoints" / "latest").exists()
    (data,) = rows(db, "SELECT data FROM rounds WHERE round = 1")[0]
    validated = json.loads(data)["accepted_ids"]
    assert validated, "round 1 validated no task: the test proves nothing"
    bills = rows(db, "SELECT id, calls FROM teacher_usage WHERE round = 1 ORDER BY id")

    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "--set", "algorithm.options.step_delay=0"],
                             capture_output=True, text=True, env=sub_env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "training starts again from step 0" in resumed.stdout
    assert "round 1: its inputs are those of a rolled-back attempt" in resumed.stdout
    admitted = {r[0] for r in rows(db, "SELECT id FROM tasks WHERE origin='synthetic'")}
    assert set(validated) <= admitted
    # the same bills, counted once, and none of them marked as a rolled-back attempt any more
    assert rows(db, "SELECT id, calls FROM teacher_usage WHERE round = 1 ORDER BY id") == bills
    assert not rows(db, "SELECT * FROM teacher_usage WHERE round = 1 AND attempt IS NOT NULL")
    assert not rows(db, "SELECT * FROM rolled_back_rounds")
