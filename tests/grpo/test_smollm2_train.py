"""Two GRPO steps of SmolLM2-135M-Instruct on the warehouse through `coevolve run`, killed while
it writes the first checkpoint (after the folder is in place, before the `latest` pointer) and
resumed: the weights moved and the resumed run goes on from step 1. The kill comes before step 2,
so no step of the real model is computed twice (rolling back a killed step is checked on the tiny
model in tests/core/test_resume_exact.py).

Kept small for two shared CPU cores: 2 tasks x group 2, 16 new tokens, two agent turns, no
evolution, no evaluation (each GRPO step still takes a minute or more here)."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, coevolve_cmd

from .smollm2 import smollm2_folder


def _config(run: Path) -> Path:
    cfg = yaml.safe_load((REPO / "examples" / "warehouse-smollm2.yaml").read_text())
    cfg.update(
        run_dir=str(run),
        plugins=[],
        environment={"name": "warehouse", "options": {"max_steps": 2, "tool_docs": "none"}},
        teacher={"name": "random-explorer"},
        detectors=[{"name": "boundary"}],
        rollout={"group_size": 2, "max_new_tokens": 16, "max_context_tokens": 1024, "temperature": 1.0},
        training={"steps": 2, "tasks_per_step": 2, "checkpoint_every": 1},
        evolution={"enabled": False},
        pool={"seed_tasks": 4, "seed_source": "env"},
        eval={"before": False, "after": False},
    )
    cfg["policy"]["options"]["max_context"] = 1024
    # lr large enough that one step changes float32 weights visibly; weight decay moves them even
    # when every group's rewards are equal (no policy gradient then)
    cfg["algorithm"]["options"].update(lr=1.0e-5, weight_decay=0.01, micro_batch_size=2)
    path = run.parent / "smollm2-train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
def test_two_grpo_steps_move_the_weights_and_a_checkpoint_resumes(tmp_path: Path, sub_env: dict[str, str]) -> None:
    from safetensors.torch import load_file

    folder = smollm2_folder()
    run = tmp_path / "run"
    config = _config(run)
    env = {**sub_env, "OMP_NUM_THREADS": "1", "COEVOLVE_TEST_KILL_AT": "checkpoint_renamed:1"}
    first = subprocess.run([*coevolve_cmd(), "run", str(config), "-q"], capture_output=True, text=True, env=env, timeout=1800)
    assert first.returncode != 0, "the kill point was not reached"
    assert (run / "checkpoints" / "step-000001").is_dir()
    assert not (run / "checkpoints" / "step-000002").is_dir()

    env.pop("COEVOLVE_TEST_KILL_AT")
    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run)], capture_output=True, text=True, env=env, timeout=1800)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr

    base = load_file(str(folder / "model.safetensors"))
    step1 = load_file(str(run / "checkpoints" / "step-000001" / "policy" / "model.safetensors"))
    step2 = load_file(str(run / "checkpoints" / "step-000002" / "policy" / "model.safetensors"))
    assert base.keys() == step1.keys() == step2.keys()
    moved1 = sum(int((base[k] != step1[k]).any()) for k in base)
    moved2 = sum(int((step1[k] != step2[k]).any()) for k in base)
    assert moved1 > len(base) // 2 and moved2 > len(base) // 2, (moved1, moved2, len(base))

    con = sqlite3.connect(run / "run.sqlite")
    try:
        steps = sorted({r[0] for r in con.execute("SELECT step FROM trajectories WHERE phase = 'train'")})
        rows = con.execute("SELECT data FROM trajectories WHERE phase = 'train'").fetchall()
    finally:
        con.close()
    assert steps == [1, 2]
    assert len(rows) == 2 * 2 * 2  # two steps of two tasks x group 2, each recorded once
