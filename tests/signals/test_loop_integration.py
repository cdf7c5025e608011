"""The three detectors inside the core loop: `coevolve run` stores their signals and checkpoints their state.

Uses the core's toy policy/algorithm (tests/core/toy_plugin.py) on the example key-value store
environment, so it needs no model; the detectors are the real plugin, found by entry point.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import yaml

from tests.conftest import coevolve_cmd

CONFIG = {
    "seed": 3,
    "plugins": ["tests.core.toy_plugin"],
    "environment": {"name": "kvstore", "options": {"train_tasks": 8, "test_tasks": 4, "max_steps": 4}},
    "policy": {"name": "toy-menu"},
    "algorithm": {"name": "toy-reinforce", "options": {"lr": 2.0}},
    "detectors": [
        {"name": "forgetting", "options": {"window": 8}},
        {"name": "boundary"},
        {"name": "rare", "options": {"theta": 20, "n_min": 16, "min_count": 1}},
    ],
    "teacher": {"name": "random-explorer"},
    "rollout": {"group_size": 4},
    "training": {"steps": 4, "tasks_per_step": 4, "checkpoint_every": 2},
    "evolution": {"every": 2},
    "eval": {"before": False, "after": False},
    "pool": {"seed_tasks": 8, "seed_source": "env"},
}


def test_signals_land_in_the_store_and_state_in_the_checkpoint(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = dict(CONFIG, run_dir=str(tmp_path / "run"))
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([*coevolve_cmd(), "run", str(path), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    run = tmp_path / "run"
    con = sqlite3.connect(run / "run.sqlite")
    try:
        kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM signals")}
        rows = con.execute("SELECT kind, data FROM signals").fetchall()
        n_traj = con.execute("SELECT COUNT(*) FROM trajectories").fetchone()[0]
        success = {i: bool(ok) for i, ok in con.execute("SELECT id, success FROM trajectories")}
    finally:
        con.close()
    assert kinds and kinds <= {"forgetting", "boundary", "rare"}
    assert n_traj > 0
    for kind, data in rows:
        sig = json.loads(data)
        assert sig["kind"] == kind and sig["reason"] and sig["evidence"]
        assert sig["id"] == f"sig-{kind}-{sig['step']}-{sig['trajectory_id']}"
        # the detectors judged success by the trajectories' own flags, as evaluation does
        ev = sig["evidence"]
        if kind == "boundary":
            assert ev["group_successes"] == [success[t] for t in ev["group_trajectory_ids"]]
            assert True in ev["group_successes"] and False in ev["group_successes"]
        if kind == "forgetting":
            assert success[sig["trajectory_id"]] is False and any(ev["window_successes"])
    shown = subprocess.run([*coevolve_cmd(), "signals", str(run)], capture_output=True, text=True, env=sub_env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    for k in kinds:
        assert k in shown.stdout
    # the detector state of the last checkpoint is JSON and holds the rare counts seen so far
    latest = (run / "checkpoints" / "latest").read_text().strip()
    texts = [p.read_text() for p in (run / "checkpoints" / latest).rglob("*.json")]
    assert any('"window": 8' in t and '"tasks"' in t for t in texts), "forgetting state not found in the checkpoint"
    assert any('"counts"' in t and '"N"' in t for t in texts), "rare state not found in the checkpoint"
