"""A whole `coevolve run` whose LLM teacher keeps failing in every way a remote model can:
training continues, every failure is counted, and the good answers still become tasks."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import write_config


def test_training_continues_through_teacher_faults(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{
        "training.steps": 8,
        "evolution.workers": 1,
        "environment.options": {"train_tasks": 8, "test_tasks": 4, "max_steps": 8},
        "plugins": ["tests.core.toy_plugin", "tests.teacher.faulty_provider"],
        "teacher": {"name": "litellm", "options": {"model": "faulty/teacher", "retries": 1, "backoff_s": 0.0,
                                                    "rounds": 1, "steps_per_round": 4, "max_candidates": 2}},
    })
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg)], capture_output=True, text=True, env=sub_env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    steps = [r[0] for r in db.execute("SELECT DISTINCT step FROM metrics WHERE key='rollout/reward_mean' ORDER BY step")]
    assert steps == list(range(1, 9))
    rounds = [json.loads(r[0]) for r in db.execute("SELECT data FROM rounds")]
    assert rounds, "no evolution round ran"
    usage = db.execute("SELECT SUM(calls), SUM(failures) FROM teacher_usage").fetchone()
    assert usage[0] > 0 and usage[1] > 0, usage
    reasons = [r[0] for r in db.execute("SELECT reason FROM verdicts WHERE accepted = 0")]
    accepted = db.execute("SELECT COUNT(*) FROM verdicts WHERE accepted = 1").fetchone()[0]
    assert accepted >= 1, reasons
    synthetic = db.execute("SELECT COUNT(*) FROM tasks WHERE origin = 'synthetic'").fetchone()[0]
    assert synthetic >= 1
    # the same proposal made again in a later round is rejected as a duplicate, with that reason
    assert synthetic == accepted
    assert any("duplicate" in r for r in reasons) and any("no-such-key" in r for r in reasons)
    assert db.execute("SELECT value FROM meta WHERE key='status'").fetchone()[0] == '"finished"'
    # what the model's replies did is on the round's record and in the report, garbage included
    stages = rounds[-1]["teacher_stages"]
    assert stages["stages"]["reflect"]["replies"] >= 1 and stages["stages"]["abstract"]["proposed"] >= 1, stages
    assert stages["stages"]["explore"]["unusable"] >= 1, stages  # the garbage and empty replies
    report = (tmp_path / "run" / "report.html").read_text()
    assert "What the teacher's model said" in report and 'id="teacher-stages"' in report
    assert "<th>unusable</th>" in report and "The agent skipped the write." in report
