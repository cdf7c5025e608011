"""Issue 16's findings, one test each, through `coevolve run` as a user runs it (the toy policy
and algorithm of toy_plugin.py on the kvstore environment: no torch, seconds per run).

1 a kill after a round's admission, before the next checkpoint; 2 evaluation trajectories
duplicated; 3 two writers on one folder; 4 damaged or missing files; 5 configuration changed on
resume; 6 a plugin module that does not import; 7 SIGTERM; 9 errors with exit 2 and no
traceback. Plus: a run folder written by the code of commit fa4cf36 resumes; `coevolve eval`
needs neither the teacher nor the lock; lifecycle hooks see a read-only view.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, coevolve_cmd
from tests.core.test_loop_cli import _db_rows, _wait_for, rows, write_config

FIXTURE = REPO / "tests" / "data" / "run-fa4cf36"  # written by `coevolve run` at commit fa4cf36, killed at step 5


def cli(args: list[str], env: dict[str, str], kill_at: str | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in env.items() if k != "COEVOLVE_TEST_KILL_AT"}
    if kill_at:
        env["COEVOLVE_TEST_KILL_AT"] = kill_at
    return subprocess.run([*coevolve_cmd(), *args], capture_output=True, text=True, env=env, timeout=300, **kw)


def content(run: Path) -> dict[str, Any]:
    """A run's records by content (wall times aside), for comparing two runs."""
    db = run / "run.sqlite"

    def strip(d: str | bytes) -> Any:
        x = json.loads(zlib.decompress(d) if isinstance(d, bytes) else d)  # trajectories are compressed by default
        x.pop("seconds", None)
        if isinstance(x.get("info"), dict):
            x["info"].pop("rollout_seconds", None)
        return x

    return {
        "tasks": [(i, s, strip(d)) for i, s, d in rows(db, "SELECT id, step_admitted, data FROM tasks ORDER BY seq")],
        "rounds": [(r, s, strip(d)) for r, s, d in rows(db, "SELECT round, step, data FROM rounds ORDER BY round")],
        "signals": rows(db, "SELECT id, step, round, data FROM signals ORDER BY step, id"),
        "evals": [(s, p, strip(d)) for s, p, d in rows(db, "SELECT step, phase, data FROM evals ORDER BY phase, step")],
        "trajectories": [(i, s, p, strip(d)) for i, s, p, d in rows(db, "SELECT id, step, phase, data FROM trajectories ORDER BY id")],
        "policy": json.loads((run / "checkpoints" / (run / "checkpoints" / "latest").read_text() / "policy" / "menu_policy.json").read_text()),
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The toy run (8 steps, a round every 2, a checkpoint every 3), uninterrupted, per mode."""
    import os

    from tests.conftest import REPO as repo

    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    out = {}
    for mode in ("sync", "async"):
        tmp = tmp_path_factory.mktemp(f"whole-{mode}")
        cfg = write_config(tmp, **{"training.steps": 8, "training.checkpoint_every": 3, "evolution.mode": mode})
        done = cli(["run", str(cfg), "-q"], env)
        assert done.returncode == 0, done.stderr[-3000:]
        out[mode] = content(tmp / "run")
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_1_kill_right_after_an_admission_ends_like_an_uninterrupted_run(
        tmp_path: Path, sub_env: dict[str, str], mode: str, uninterrupted: dict[str, dict[str, Any]]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 8, "training.checkpoint_every": 3, "evolution.mode": mode})
    run = tmp_path / "run"
    # round 2 joins the pool at step 4 (sync) or 6 (async); the last checkpoint then is of step 3
    first = cli(["run", str(cfg), "-q"], sub_env, kill_at="after_admission:2")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    assert (run / "checkpoints" / "latest").read_text() in ("step-000003", "step-000006")
    resumed = cli(["run", "--resume", str(run), "-q"], sub_env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got = content(run)
    want = uninterrupted[mode]
    for key in want:
        assert got[key] == want[key], f"{key} differ after a kill right after an admission"
    # no synthetic task points to a signal that is not in the store
    signal_ids = {s for (s,) in rows(run / "run.sqlite", "SELECT id FROM signals")}
    assert all(t[2]["lineage"]["signal_id"] in signal_ids for t in got["tasks"] if t[2]["origin"] == "synthetic")


def test_2_evaluations_are_replaced_never_appended(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 4, "training.checkpoint_every": 2, "eval.every": 2})
    run = tmp_path / "run"
    db = run / "run.sqlite"
    per_phase = "SELECT phase, step, COUNT(*) FROM trajectories WHERE phase LIKE 'eval-%' GROUP BY phase, step ORDER BY phase, step"
    # killed between the 'before' evaluation and the first checkpoint, then during the 'after' one
    assert cli(["run", str(cfg), "-q"], sub_env, kill_at="step_recorded:1").returncode == -signal.SIGKILL
    assert cli(["run", "--resume", str(run), "-q"], sub_env, kill_at="eval_after:1").returncode == -signal.SIGKILL
    done = cli(["run", "--resume", str(run), "-q"], sub_env)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = [("eval-after", 4, 4), ("eval-before", 0, 4), ("eval-during", 2, 4)]
    assert rows(db, per_phase) == expected
    assert sorted((p, s) for p, s in rows(db, "SELECT phase, step FROM evals")) == [("after", 4), ("before", 0), ("during", 2)]
    # resuming a finished run changes nothing
    again = cli(["run", "--resume", str(run)], sub_env)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert rows(db, per_phase) == expected and len(rows(db, "SELECT * FROM evals")) == 3


def test_3_one_writer_per_run_folder(tmp_path: Path, sub_env: dict[str, str]) -> None:
    go_on = tmp_path / "go-on"  # the first run waits at its second step until the checks below are done
    cfg = write_config(tmp_path, **{"training.steps": 6, "algorithm.options.hold_until": str(go_on)})
    run = tmp_path / "run"
    db = run / "run.sqlite"
    first = subprocess.Popen([*coevolve_cmd(), "run", str(cfg), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)
    try:
        _wait_for(lambda: (_db_rows(db, "SELECT COUNT(*) FROM metrics WHERE key='rollout/reward_mean'") or [(0,)])[0][0] >= 1,
                  "the first step", first)
        for args in (["run", str(cfg), "-q"], ["run", "--resume", str(run), "-q"], ["run", "--resume", str(run), "--restart", "-q"]):
            second = cli(args, sub_env)
            assert second.returncode == 2, second.stderr
            assert f"process {first.pid}" in second.stderr and "Traceback" not in second.stderr
        # reading needs no lock, while the run writes
        assert cli(["pool", "list", str(run)], sub_env).returncode == 0
        assert cli(["signals", str(run)], sub_env).returncode == 0
        assert cli(["report", str(run)], sub_env).returncode == 0
    finally:
        go_on.touch()
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-3000:]
    per_step = rows(db, "SELECT step, COUNT(*) FROM trajectories WHERE phase = 'train' GROUP BY step")
    assert per_step == [(s, 16) for s in range(1, 7)]  # 4 tasks x 4 rollouts, written once
    assert len(rows(db, "SELECT id FROM tasks")) == len({r[0] for r in rows(db, "SELECT fingerprint FROM tasks")})


@pytest.fixture
def finished(tmp_path: Path, sub_env: dict[str, str]) -> Path:
    cfg = write_config(tmp_path, **{"training.steps": 4, "training.checkpoint_every": 2})
    # stopped after its step 3: the store holds steps 1-3, the newest checkpoint is of step 2
    assert cli(["run", str(cfg), "-q"], sub_env, kill_at="step_recorded:3").returncode == -signal.SIGKILL
    return tmp_path / "run"


@pytest.mark.parametrize("damage", ["empty", "deleted", "truncated"])
def test_4_a_missing_or_damaged_store_is_an_error_not_an_empty_run(finished: Path, sub_env: dict[str, str], damage: str) -> None:
    db = finished / "run.sqlite"
    for extra in ("run.sqlite-wal", "run.sqlite-shm"):
        (finished / extra).unlink(missing_ok=True)
    if damage == "empty":
        db.write_bytes(b"")
    elif damage == "deleted":
        db.unlink()
    else:
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 2])
    out = cli(["run", "--resume", str(finished)], sub_env)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert {"empty": "is empty", "deleted": "is missing", "truncated": "damaged"}[damage] in out.stderr
    assert "--restart" in out.stderr
    assert (finished / "checkpoints" / "step-000002").is_dir()
    debug = cli(["run", "--resume", str(finished), "--debug"], sub_env)
    assert debug.returncode == 2 and "Traceback" in debug.stderr
    restarted = cli(["run", "--resume", str(finished), "--restart", "-q"], sub_env)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert list(finished.glob("previous-*/checkpoints/step-000002"))  # moved aside, not deleted


@pytest.mark.parametrize("part", ["policy/menu_policy.json", "algorithm/reinforce.json", "state.json"])
def test_4_a_damaged_checkpoint_falls_back_to_the_one_before(tmp_path: Path, sub_env: dict[str, str], part: str,
                                                             uninterrupted: dict[str, dict[str, Any]]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 8, "training.checkpoint_every": 3})
    run = tmp_path / "run"
    assert cli(["run", str(cfg), "-q"], sub_env, kill_at="step_recorded:7").returncode == -signal.SIGKILL
    target = run / "checkpoints" / "step-000006" / part
    target.write_bytes(target.read_bytes()[:-7])
    out = cli(["run", "--resume", str(run)], sub_env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "checkpoint step-000006 is damaged" in out.stdout and "resumed from step-000003" in out.stdout
    assert (run / "checkpoints" / "step-000006.damaged").is_dir()
    got = content(run)
    for key in ("tasks", "rounds", "signals", "evals", "policy"):
        assert got[key] == uninterrupted["sync"][key], key


def test_4_a_checkpoint_that_fails_to_load_falls_back_too(tmp_path: Path, sub_env: dict[str, str]) -> None:
    # checkpoints written before manifests existed: the damage shows only when loading
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    (tmp_path / "gate-open").write_text("")
    (run / "checkpoints" / "step-000004" / "algorithm" / "reinforce.json").write_text("{trunc")
    out = cli(["run", "--resume", str(run), "-q", "--set", "algorithm.options.step_delay=0"], sub_env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert rows(run / "run.sqlite", "SELECT value FROM meta WHERE key = 'resumed_from'") == [("2",)]


def test_every_start_records_its_machine(tmp_path: Path, sub_env: dict[str, str]) -> None:
    # a seed's numbers repeat only on the same kind of machine: each start, fresh or resumed, says which
    cfg = write_config(tmp_path, **{"training.steps": 2})
    run = tmp_path / "run"
    assert cli(["run", str(cfg), "-q"], sub_env).returncode == 0
    out = cli(["run", "--resume", str(run), "-q", "--set", "training.steps=3"], sub_env)
    assert out.returncode == 0, out.stderr[-3000:]
    starts = json.loads(rows(run / "run.sqlite", "SELECT value FROM meta WHERE key = 'machines'")[0][0])
    assert [m["step"] for m in starts] == [0, 2]
    import os
    import platform

    for m in starts:
        assert m["cores"] == os.cpu_count() and m["python"] == platform.python_version() and m["started"]
        assert m["packages"]["coevolve-sdk"] and "torch_cpu_kernels" not in m  # the toy run never imports torch


def test_4_deleted_checkpoints_of_a_finished_run_delete_nothing(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 3})
    run = tmp_path / "run"
    assert cli(["run", str(cfg), "-q"], sub_env).returncode == 0
    before = {t: rows(run / "run.sqlite", f"SELECT COUNT(*) FROM {t}") for t in ("metrics", "trajectories", "tasks", "signals")}
    shutil.rmtree(run / "checkpoints")
    out = cli(["run", "--resume", str(run)], sub_env)
    assert out.returncode == 2 and "no intact checkpoint" in out.stderr and "--restart" in out.stderr
    assert {t: rows(run / "run.sqlite", f"SELECT COUNT(*) FROM {t}") for t in before} == before


def test_5_configuration_changes_on_resume(finished: Path, sub_env: dict[str, str]) -> None:
    db = finished / "run.sqlite"
    metrics = rows(db, "SELECT COUNT(*) FROM metrics")
    refused = cli(["run", "--resume", str(finished), "--set", "seed=5", "--set", "training.tasks_per_step=2"], sub_env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "seed: 3 -> 5" in refused.stderr and "training.tasks_per_step: 4 -> 2" in refused.stderr
    assert rows(db, "SELECT COUNT(*) FROM metrics") == metrics  # nothing happened
    edited = yaml.safe_load((finished / "config.yaml").read_text())
    edited["algorithm"]["options"]["lr"] = 0.5
    (finished / "config.yaml").write_text(yaml.safe_dump(edited))
    by_file = cli(["run", "--resume", str(finished)], sub_env)
    assert by_file.returncode == 2 and "algorithm.options.lr: 2.0 -> 0.5" in by_file.stderr
    edited["algorithm"]["options"]["lr"] = 2.0
    (finished / "config.yaml").write_text(yaml.safe_dump(edited))
    allowed = cli(["run", "--resume", str(finished), "-q", "--set", "training.steps=5", "--set", "eval.max_tasks=2"], sub_env)
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    (rev,) = rows(db, "SELECT step, changes, forced FROM config_revisions")
    assert rev[0] == 2 and rev[2] == 0 and set(json.loads(rev[1])) == {"eval.max_tasks: null -> 2", "training.steps: 4 -> 5"}
    assert json.loads(rows(db, "SELECT value FROM meta WHERE key = 'config'")[0][0])["training"]["steps"] == 5
    assert yaml.safe_load((finished / "config.yaml").read_text())["training"]["steps"] == 5
    assert [r[0] for r in rows(db, "SELECT DISTINCT step FROM metrics WHERE key = 'rollout/reward_mean' ORDER BY step")] == [1, 2, 3, 4, 5]
    forced = cli(["run", "--resume", str(finished), "-q", "--set", "seed=5", "--set", "training.steps=6", "--allow-config-change"], sub_env)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert rows(db, "SELECT forced FROM config_revisions ORDER BY revision") == [(0,), (1,)]


def test_6_a_plugin_module_that_does_not_import_stops_the_run(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, plugins=["tests.core.toy_plugin", "a_module_that_does_not_exist"])
    for args in (["run", str(cfg)], ["config", "check", str(cfg)]):
        out = cli(args, sub_env)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "a_module_that_does_not_exist" in out.stderr and "No module named" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "run.sqlite").exists()


def test_6_an_algorithm_written_for_the_old_process_api_is_refused_with_the_new_one_named(tmp_path: Path, sub_env: dict[str, str]) -> None:
    # broadcast/gather/barrier moved from Algorithm to Algorithm.processes: an algorithm that still
    # defines them would train each process alone, silently
    (tmp_path / "old_api_algo.py").write_text(
        "from coevolve_sdk import Algorithm, hookimpl\n\n"
        "class OldApi(Algorithm):\n"
        "    name = 'old-api'\n"
        "    def step(self, groups): return {}\n"
        "    def save(self, path): pass\n"
        "    def load(self, path): pass\n"
        "    def broadcast(self, obj): return obj\n\n"
        "@hookimpl\n"
        "def register_algorithms():\n"
        "    return [OldApi]\n"
    )
    env = {**sub_env, "PYTHONPATH": f"{tmp_path}:{sub_env['PYTHONPATH']}"}
    cfg = write_config(tmp_path, plugins=["tests.core.toy_plugin", "old_api_algo"], algorithm={"name": "old-api"})
    out = cli(["run", str(cfg)], env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "OldApi defines broadcast" in out.stderr and "'processes' property" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "run.sqlite").exists()


def test_6_an_installed_plugin_that_fails_to_load_but_is_not_used_is_a_warning(tmp_path: Path, sub_env: dict[str, str]) -> None:
    site = tmp_path / "site"  # a real distribution with a coevolve entry point whose module raises on import
    dist = site / "coevolve_broken_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: coevolve-broken-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[coevolve]\nbroken-demo = coevolve_broken_demo\n")
    (site / "coevolve_broken_demo.py").write_text("raise ImportError('this plugin is broken on purpose')\n")
    env = {**sub_env, "PYTHONPATH": f"{site}:{sub_env['PYTHONPATH']}"}
    cfg = write_config(tmp_path, **{"training.steps": 1})
    out = cli(["run", str(cfg)], env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "broken-demo" in out.stdout and "this plugin is broken on purpose" in out.stdout and "warning" in out.stdout


def test_7_sigterm_stops_like_ctrl_c_and_the_run_resumes(tmp_path: Path, sub_env: dict[str, str],
                                                         uninterrupted: dict[str, dict[str, Any]]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 8, "training.checkpoint_every": 3, "algorithm.options.step_delay": 0.4})
    run = tmp_path / "run"
    proc = subprocess.Popen([*coevolve_cmd(), "run", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env)
    _wait_for(lambda: (run / "checkpoints" / "latest").exists(), "the first checkpoint", proc)
    time.sleep(0.6)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
    assert "Terminated (SIGTERM)" in err and f"coevolve run --resume {run}" in err and "Traceback" not in err
    assert not (run / ".coevolve.lock").read_text()  # released on the way out
    resumed = cli(["run", "--resume", str(run), "-q", "--set", "algorithm.options.step_delay=0"], sub_env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got = content(run)
    for key in ("tasks", "rounds", "signals", "evals", "policy"):
        assert got[key] == uninterrupted["sync"][key], key


def test_a_run_folder_of_commit_fa4cf36_resumes(tmp_path: Path, sub_env: dict[str, str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    (tmp_path / "gate-open").write_text("")  # its teacher waits for this file (relative to the working directory)
    assert rows(run / "run.sqlite", "SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]
    out = cli(["run", "--resume", str(run), "--set", "algorithm.options.step_delay=0"], sub_env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "resumed from step-000004" in out.stdout and "round 1 was cut short by the stop" in out.stdout
    db = run / "run.sqlite"
    assert [r[0] for r in rows(db, "SELECT DISTINCT step FROM metrics WHERE key IN ('reward_mean', 'rollout/reward_mean') ORDER BY step")] \
        == list(range(1, 9))
    # the round that was running at the old checkpoint consumed the signals the checkpoint listed
    state = json.loads((FIXTURE / "checkpoints" / "step-000004" / "state.json").read_text())
    in_flight = {s["id"] for s in state["in_flight_round"]["signals"]}
    assert {s for (s,) in rows(db, "SELECT id FROM signals WHERE round = 1")} == in_flight
    assert rows(db, "SELECT COUNT(*) FROM tasks WHERE origin = 'synthetic'")[0][0] > 0
    assert cli(["report", str(run)], sub_env).returncode == 0


def test_eval_needs_neither_the_teacher_nor_the_lock_and_writes_nothing(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 2, "training.checkpoint_every": 1})
    run = tmp_path / "run"
    assert cli(["run", str(cfg), "-q"], sub_env).returncode == 0
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["teacher"] = {"name": "litellm", "options": {"model": "openai/gpt-4o-mini", "api_key_env": "COEVOLVE_TEST_KEY_NOT_SET"}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    before = (run / "run.sqlite").read_bytes()
    from coevolve_sdk.storage.lock import RunLock

    with RunLock(run):  # as if a run were writing the folder right now
        out = cli(["eval", str(run)], {k: v for k, v in sub_env.items() if k != "COEVOLVE_TEST_KEY_NOT_SET"})
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout)
    assert res["checkpoint"] == "step-000002" and res["tasks"] == 4 and res["step"] == 2
    assert "evaluating (cli): 4/4" in out.stderr
    assert (run / "run.sqlite").read_bytes() == before
    # a checkpoint written before the policy had its own folder: algorithm/policy/
    legacy = tmp_path / "legacy"
    shutil.copytree(FIXTURE, legacy)
    step = legacy / "checkpoints" / "step-000004" / "algorithm"
    (step / "policy").mkdir()
    (step / "menu_policy.json").rename(step / "policy" / "menu_policy.json")
    old = cli(["eval", str(legacy)], sub_env)
    assert old.returncode == 0 and json.loads(old.stdout)["checkpoint"] == "step-000004", old.stderr[-3000:]


def test_hooks_see_a_read_only_view_also_from_worker_threads(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 4, "evolution.mode": "async"})
    run = tmp_path / "run"
    assert cli(["run", str(cfg), "-q"], sub_env).returncode == 0
    views = [json.loads((run / "toy-hooks" / f"step-{s:04d}.json").read_text()) for s in range(1, 5)]
    sizes = [r[0] for r in rows(run / "run.sqlite", "SELECT value FROM metrics WHERE key = 'pool/size' AND step > 0 ORDER BY step")]
    assert [v["pool_size"] for v in views] == sizes and [v["tasks"] for v in views] == sizes
    assert all(v["seed"] == 3 and v["step"] == i for i, v in enumerate(views, 1))  # the hook's write to its copy changed nothing
    proposed = json.loads((run / "toy-hooks" / "proposed-0002.json").read_text())
    assert proposed["thread"] != "MainThread" and proposed["pool_size"] == 8


def test_a_round_skipped_for_lack_of_signals_is_said_loudly(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 3, "detectors": []})  # a round at the last step would not start at all
    run = tmp_path / "run"
    out = cli(["run", str(cfg)], sub_env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "WARNING: evolution round skipped at step 2: no signals" in out.stdout and "no detectors" in out.stdout
    assert "evolution round skipped at step 2" in (run / "report.html").read_text()


def test_seed_tasks_whose_reference_actions_fail_are_left_out(tmp_path: Path) -> None:
    from coevolve_sdk.components.registry import get_registry
    from coevolve_sdk.evolution.seed_pool import check_seed_tasks
    from coevolve_sdk.storage.store import RunStore

    env_cls = get_registry().get("environment", "kvstore")
    make_env = lambda: env_cls({"train_tasks": 4})  # noqa: E731
    tasks = make_env().tasks("train")
    broken = tasks[1].model_copy(update={"reference_actions": ["this is not a tool call"] * len(tasks[1].reference_actions)})
    store = RunStore(tmp_path / "run.sqlite")
    logged: list[str] = []
    kept = check_seed_tasks(make_env, [tasks[0], broken, *tasks[2:]], store, log=logged.append, progress=lambda *a: None)
    assert [t.id for t in kept] == [t.id for t in tasks if t.id != broken.id]
    assert broken.id in logged[0] and logged[0].startswith("WARNING") and store.notes()[0]["kind"] == "seed_tasks_dropped"
    from coevolve_sdk.errors import ConfigError

    with pytest.raises(ConfigError, match="none of its 1 train tasks"):
        check_seed_tasks(make_env, [broken], store, log=logged.append, progress=lambda *a: None)
    from coevolve_sdk.components.blame import ComponentError

    with pytest.raises(ComponentError, match="is a dict, not a coevolve_sdk.Task"):
        check_seed_tasks(make_env, [broken.model_dump()], store, log=logged.append, progress=lambda *a: None)  # type: ignore[list-item]


def test_the_store_says_which_round_consumed_each_signal(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 6})
    run = tmp_path / "run"
    assert cli(["run", str(cfg), "-q"], sub_env).returncode == 0
    by_round = rows(run / "run.sqlite", "SELECT round, MIN(step), MAX(step) FROM signals GROUP BY round ORDER BY round")
    starts = {r: s for r, s in rows(run / "run.sqlite", "SELECT round, step FROM round_starts")}
    for rnd, lo, hi in by_round:
        assert rnd is not None or lo > max(starts.values()), "a signal before the last round was consumed by none"
        if rnd is not None:
            assert hi <= starts[rnd] and (rnd == 1 or lo > starts[rnd - 1])
    con = sqlite3.connect(run / "run.sqlite")
    assert con.execute("SELECT COUNT(*) FROM signals WHERE round IS NOT NULL").fetchone()[0] > 0


def test_a_lifecycle_hook_that_raises_names_its_plugin(tmp_path: Path, sub_env: dict[str, str]) -> None:
    """docs/plugins/hooks.md: an exception in a lifecycle hook stops the run, reported with the
    plugin's name and its own line, not as a bare error from inside pluggy."""
    (tmp_path / "loud_observer.py").write_text(
        "import os\n"
        "from coevolve_sdk import hookimpl\n\n\n"
        "@hookimpl\n"
        "def on_step_end(run, step, metrics):\n"
        "    if step == 2 and os.environ.get('DASHBOARD_DOWN'):\n"
        "        raise ValueError('the dashboard is down')\n"
    )
    cfg = write_config(tmp_path, **{"training.steps": 3, "plugins": ["tests.core.toy_plugin", "loud_observer"]})
    env = {**sub_env, "PYTHONPATH": f"{tmp_path}:{sub_env.get('PYTHONPATH', '')}"}
    out = cli(["run", str(cfg)], {**env, "DASHBOARD_DOWN": "1"})
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr
    assert "plugin 'loud_observer'" in err and "on_step_end() hook raised ValueError: the dashboard is down" in err, err
    assert "loud_observer.py\", line 8" in err and "COEVOLVE_DISABLE_PLUGINS=loud_observer" in err, err
    assert "Traceback" not in err
    # nothing is lost: once the plugin's trouble is gone the run resumes and finishes
    resumed = cli(["run", "--resume", str(tmp_path / "run")], env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert rows(tmp_path / "run" / "run.sqlite", "SELECT MAX(step) FROM metrics")[0][0] == 3


def test_a_hook_error_names_the_plugin_without_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevolve_sdk.components.registry import Registry
    from coevolve_sdk.errors import PluginHookError

    (tmp_path / "quiet_observer.py").write_text("from coevolve_sdk import hookimpl\n\n\n@hookimpl\ndef on_step_end(run, step, metrics):\n"
                                                "    return metrics['x'] * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry(load_entry_points=False, extra_modules=["quiet_observer"])
    assert reg.call_hook("on_step_end", run=None, step=1, metrics={"x": 2}) == [4]
    with pytest.raises(PluginHookError, match=r"plugin 'quiet_observer': its on_step_end\(\) hook raised KeyError: 'x'"):
        reg.call_hook("on_step_end", run=None, step=1, metrics={})


def test_a_run_that_does_not_train_scores_every_held_out_task(tmp_path: Path, sub_env: dict[str, str]) -> None:
    """With eval.subset, the last evaluation scores the whole split. In a run that does not
    train (an experiment's warm-start-only or zero-shot arm) the last evaluation is 'before':
    scored on the subset only, that arm would be compared with the training arms on other tasks."""
    cfg = write_config(tmp_path, **{"training.steps": 0, "eval": {"split": "test", "subset": 2}})
    out = cli(["run", str(cfg)], sub_env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (tasks, data), = rows(tmp_path / "run" / "run.sqlite", "SELECT json_extract(data, '$.tasks'), data FROM evals WHERE phase = 'before'")
    assert tasks == 4, data  # the toy world's 4 test tasks, not the subset's 2
    assert json.loads(data)["subset_tasks"] == 2
