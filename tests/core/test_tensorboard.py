"""Metrics reach TensorBoard when it is installed (it is, with the dev extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import write_config


def test_step_metrics_are_written_as_tensorboard_scalars(tmp_path: Path, sub_env: dict[str, str]) -> None:
    pytest.importorskip("tensorboard", reason="the dev extra installs tensorboard")
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


def test_writing_scalars_does_not_import_torch(tmp_path: Path) -> None:
    """A run whose components do not use torch (the toy world, an LLM-teacher-only set-up) does not
    pay torch's import (about 2 s of CPU) just to log its metrics."""
    pytest.importorskip("tensorboard", reason="the dev extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code = ("import sys; from pathlib import Path; from coevolve_sdk.run.tensorboard import TensorBoard; "
            f"tb = TensorBoard(Path({str(tmp_path)!r})); tb.write(1, {{'a/b': 0.5}}); tb.write(2, {{'a/b': 0.25}}); tb.close(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", "writing TensorBoard scalars imported torch"
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("a/b")] == [(1, 0.5), (2, 0.25)]
