"""``eval.subset``: evaluations during training score the first N held-out tasks, the final one
scores the whole split and reports those N too, so a curve compares the same tasks throughout."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import rows, write_config


def test_a_subset_during_training_and_the_whole_split_at_the_end(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 2, "environment.options.test_tasks": 6,
                                    "eval": {"split": "test", "every": 1, "subset": 2}})
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg)], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    db = tmp_path / "run" / "run.sqlite"
    evals = {(phase, step): json.loads(data) for phase, step, data in rows(db, "SELECT phase, step, data FROM evals")}
    assert {k: v["tasks"] for k, v in evals.items()} == {("before", 0): 2, ("during", 1): 2, ("after", 2): 6}
    after = evals[("after", 2)]
    assert after["subset_tasks"] == 2
    # the subset's figures are the final evaluation's on the tasks the earlier ones scored
    first = {r[0] for r in rows(db, "SELECT task_id FROM trajectories WHERE phase = 'eval-before'")}
    final = rows(db, "SELECT task_id, score, success FROM trajectories WHERE phase = 'eval-after'")
    assert len(first) == 2 and len(final) == 6
    on_first = [r for r in final if r[0] in first]
    assert abs(after["subset_mean_score"] - sum(r[1] for r in on_first) / 2) < 1e-9, (after, final)
    assert abs(after["subset_success_rate"] - sum(r[2] for r in on_first) / 2) < 1e-9
    assert "subset_tasks" not in evals[("before", 0)] and "subset_tasks" not in evals[("during", 1)]
    # the report says which tasks its bars are on
    assert "on the first 2" in (tmp_path / "run" / "report.html").read_text()
