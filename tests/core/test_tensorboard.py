"""Metrics reach TensorBoard when it is installed (it is, with the dev extra)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import write_config


def test_step_metrics_are_written_as_tensorboard_scalars(tmp_path: Path, sub_env: dict[str, str]) -> None:
    pytest.importorskip("torch.utils.tensorboard", reason="the dev extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = write_config(tmp_path, **{"training.steps": 3})
    out = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert out.returncode == 0, out.stderr
    logdir = tmp_path / "run" / "tensorboard"
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"rollout/reward_mean", "rollout/success_rate", "pool/size", "time/rollout"} <= set(tags)
    assert [e.step for e in acc.Scalars("rollout/reward_mean")] == [1, 2, 3]
