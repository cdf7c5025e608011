"""`coevolve trajectories` prints a run's episodes as conversations, from a real run folder,
read-only; the report embeds a few evaluation episodes (issue 22)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import zlib
import subprocess
from pathlib import Path

import pytest

from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.run.trajectories import format_plain, select, turns
from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import write_config

OLD_RUN = Path(__file__).resolve().parents[1] / "data" / "run-fa4cf36"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short real run of the toy world: 3 steps, evaluations before and after."""
    import os

    from tests.conftest import REPO

    tmp = tmp_path_factory.mktemp("traj")
    cfg = write_config(tmp, **{"training.steps": 3, "eval.max_tasks": 3})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg), "--quiet"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return tmp / "run"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*coevolve_cmd(), "trajectories", *args], capture_output=True, text=True, timeout=120)


def stored(run: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(run / "run.sqlite")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_prints_request_calls_results_and_reward_of_the_stored_episode(run_dir: Path) -> None:
    tid, step, data = stored(run_dir, "SELECT task_id, step, data FROM trajectories WHERE phase='train' ORDER BY step DESC, rowid DESC LIMIT 1")[0]
    traj = json.loads(zlib.decompress(data) if isinstance(data, bytes) else data)  # compressed by default
    out = cli(str(run_dir), "--phase", "train", "--limit", "1")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"task {tid}  step {step}  train" in text
    request = next(m["content"] for m in traj["messages"] if m["role"] == "user")
    assert f"request: {request}" in text
    for m in traj["messages"]:
        if m["role"] == "tool":
            assert f"{m['name']} <- {m['content'][:60]}" in text
    assert f"=> reward {traj['score']:.2f}, {'solved' if traj['success'] else 'not solved'}" in text
    assert "\x1b[" not in text  # piped: plain text, no colour codes


def test_filters_select_exactly_what_the_store_holds(run_dir: Path) -> None:
    n_eval = stored(run_dir, "SELECT COUNT(*) FROM trajectories WHERE phase LIKE 'eval-%'")[0][0]
    assert n_eval > 0
    text = cli(str(run_dir), "--phase", "eval", "--limit", "0").stdout
    assert text.count("\n== ") + text.startswith("== ") == n_eval and " train " not in text
    n_after_failed = stored(run_dir, "SELECT COUNT(*) FROM trajectories WHERE phase='eval-after' AND success=0")[0][0]
    text = cli(str(run_dir), "--phase", "after", "--failed", "--limit", "0").stdout
    assert text.count("(not solved") == n_after_failed and "(solved" not in text
    tid = stored(run_dir, "SELECT task_id FROM trajectories WHERE phase='train' AND step=2 LIMIT 1")[0][0]
    n = stored(run_dir, f"SELECT COUNT(*) FROM trajectories WHERE phase='train' AND step=2 AND task_id='{tid}'")[0][0]
    text = cli(str(run_dir), "--task", tid, "--step", "2", "--phase", "train", "--limit", "0").stdout
    assert text.count(f"task {tid}  step 2  train") == n
    assert cli(str(run_dir), "--limit", "3").stdout.count("\n== ") + 1 == 3
    solved = cli(str(run_dir), "--success", "--limit", "0").stdout
    assert "(not solved" not in solved


def test_bad_input_is_a_clear_error(run_dir: Path, tmp_path: Path) -> None:
    out = cli(str(tmp_path / "nothing-here"))
    assert out.returncode == 2 and "Error:" in out.stderr and "Traceback" not in out.stderr
    out = cli(str(run_dir), "--task", "no-such-task")
    assert out.returncode == 1 and "No episode" in out.stderr and "train" in out.stderr


def test_an_old_run_folder_is_read_without_being_changed(tmp_path: Path) -> None:
    digest = hashlib.sha256((OLD_RUN / "run.sqlite").read_bytes()).hexdigest()
    copy = tmp_path / "old"
    shutil.copytree(OLD_RUN, copy)
    (copy / "run.sqlite").chmod(0o444)  # read-only on disk: any write would fail
    out = cli(str(copy), "--phase", "before", "--limit", "2")
    assert out.returncode == 0, out.stderr
    assert "eval-before" in out.stdout and "request: " in out.stdout and "agent -> " in out.stdout
    assert hashlib.sha256((OLD_RUN / "run.sqlite").read_bytes()).hexdigest() == digest


def test_turns_split_agent_text_and_calls() -> None:
    store = RunStore(OLD_RUN / "run.sqlite", read_only=True)
    try:
        st = select(store, phase="train", limit=1)[0]
    finally:
        store.close()
    kinds = [t.kind for t in turns(st.trajectory)]
    assert kinds[0] == "request" and "system" not in kinds
    assert turns(st.trajectory, system=True)[0].kind == "system"
    assert format_plain(st).splitlines()[-1].startswith("  => reward")


def test_the_report_embeds_evaluation_episodes(run_dir: Path) -> None:
    subprocess.run([*coevolve_cmd(), "report", str(run_dir)], check=True, capture_output=True, timeout=120)
    page = (run_dir / "report.html").read_text()
    assert "<h2>Evaluation episodes</h2>" in page
    assert page.count('<details class="trajectory">') >= 2  # before and after, a few each
    assert "coevolve trajectories RUN_DIR --phase eval" in page


def test_on_a_terminal_the_conversation_is_coloured() -> None:
    from rich.console import Console

    from coevolve_sdk.run.trajectories import render_rich

    store = RunStore(OLD_RUN / "run.sqlite", read_only=True)
    try:
        st = select(store, phase="before", limit=1)[0]
    finally:
        store.close()
    console = Console(record=True, force_terminal=True, width=200, color_system="truecolor")
    console.print(render_rich(st))
    text = console.export_text(clear=False)
    assert st.trajectory.task_id in text and "request" in text and "agent → " in text and "reward 0.00" in text
    assert "\x1b[" in console.export_text(styles=True)


def test_a_trajectory_without_turns_says_why() -> None:
    from coevolve_sdk.run.trajectories import StoredTrajectory
    from coevolve_sdk.records import Trajectory

    st = StoredTrajectory("train", Trajectory(task_id="t", step=3, score=1.0, success=True), query="Do it.")
    text = format_plain(st)
    assert "request: Do it." in text and "store.keep_trajectory_steps" in text and "=> reward 1.00, solved" in text
