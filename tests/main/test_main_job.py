"""The BFCL run (examples/bfcl-tiny.yaml: `make demo CONFIG=examples/bfcl-tiny.yaml`), at a reduced
size, run as a user runs it; and its report in a browser. The warehouse demo is test_warehouse_demo.py."""

from __future__ import annotations

import json
import resource
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, coevolve_cmd

REDUCED = [
    # two steps, a round after the first: its admitted tasks join step 2 (four steps with a round
    # every two cost 70 s more and checked nothing these tests look at)
    "--set", "training.steps=2",
    "--set", "training.checkpoint_every=1",
    "--set", "evolution.every=1",
    "--set", "pool.seed_tasks=24",
    "--set", "eval.max_tasks=4",
    # the warm start's 300 updates on 4 (not 8) examples each: half the tokens, the time this test
    # spends most of; the 24 seed tasks are still cloned closely enough that step 1 has mixed groups
    "--set", "algorithm.options.warm_start.batch_size=4",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import os

    pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by scripts/install-plugins.sh (python -m coevolve_bfcl.install)")
    out_dir = tmp_path_factory.mktemp("main") / "bfcl-tiny"
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run(
        [*coevolve_cmd(), "run", str(REPO / "examples" / "bfcl-tiny.yaml"), "--set", f"run_dir={out_dir}", *REDUCED],
        capture_output=True, text=True, env=env, timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    (out_dir / "peak_rss_kb.txt").write_text(str(max(peak_kb, before)))
    (out_dir / "stdout.txt").write_text(proc.stdout)
    return out_dir


def q(run: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(run / "run.sqlite")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_steps_signals_evals_and_progress(run_dir: Path) -> None:
    assert [r[0] for r in q(run_dir, "SELECT DISTINCT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")] == [1, 2]
    assert q(run_dir, "SELECT COUNT(*) FROM signals")[0][0] > 0
    assert {r[0] for r in q(run_dir, "SELECT phase FROM evals")} == {"before", "after"}
    out = (run_dir / "stdout.txt").read_text()
    assert "step    2" in out and "signals" in out and "pool" in out and "rollout=" in out


def test_a_synthetic_task_is_admitted_with_lineage(run_dir: Path) -> None:
    rows = q(run_dir, "SELECT data FROM tasks WHERE origin='synthetic'")
    assert rows, "no synthetic task admitted"
    lin = json.loads(rows[0][0])["lineage"]
    assert lin["signal_kind"] in {"forgetting", "boundary", "rare"}
    assert lin["signal_id"] and lin["trajectory_id"] and lin["parent_task_id"] and lin["teacher"] == "random-explorer"
    assert lin["validation"]["replay_score"] == 1.0
    # the admitted synthetic task is graded by BFCL's official checker through the environment
    from coevolve_sdk.components.registry import get_registry
    from coevolve_sdk.records import Task

    task = Task.model_validate_json(rows[0][0])
    env = get_registry().get("environment", "bfcl-multi-turn")()
    assert env.replay(task, task.reference_actions).score == 1.0
    calls = [a for a in task.reference_actions if "<tool_call>" in a]
    closing = [a for a in task.reference_actions if "<tool_call>" not in a]
    assert env.replay(task, calls[:-1] + closing).score == 0.0


def test_peak_memory_under_3_gb(run_dir: Path) -> None:
    peak_gb = int((run_dir / "peak_rss_kb.txt").read_text()) / 1024 / 1024
    assert peak_gb < 3.0, f"peak RSS {peak_gb:.2f} GB"


def test_report_plots_are_real_images(run_dir: Path) -> None:
    from xml.etree import ElementTree

    svg = "{http://www.w3.org/2000/svg}"
    html = (run_dir / "report.html").read_text()
    for name in ("reward.svg", "eval.svg", "signals.svg", "pool.svg", "time.svg"):
        root = ElementTree.parse(run_dir / "report" / name).getroot()
        assert root.tag == f"{svg}svg" and int(root.get("width", 0)) > 200 and int(root.get("height", 0)) > 100, name
        # a plot with data draws marks (lines, bars, points), not only its frame and labels
        marks = root.findall(f".//{svg}polyline") + root.findall(f".//{svg}circle") + root.findall(f".//{svg}g/{svg}rect")
        assert len(marks) >= 2, name
        assert f"report/{name}" in html
    assert 'id="admitted"' in html and 'id="evals"' in html


def test_report_renders_in_headless_chromium(run_dir: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--allow-file-access-from-files"]
    url = (run_dir / "report.html").as_uri()
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert "<table" in dom and 'id="admitted"' in dom and dom.count("<img") >= 5
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1400,2400", url], capture_output=True, timeout=120)
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(shot)[..., :3]
    # the charts' first colour (#1f77b4, coevolve_sdk.run.svg.COLORS) shows up only if the plot images were drawn
    blue = np.all(np.abs(img - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.06, axis=-1)
    assert blue.sum() > 200, "the plots did not render in the browser"
