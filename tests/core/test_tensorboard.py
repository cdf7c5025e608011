"""Every run's step metrics reach TensorBoard. The SDK writes the event files itself (no
tensorboard import at run time); tensorboard's own reader (the dev extra installs it) checks them."""

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


def test_writing_scalars_imports_neither_torch_nor_tensorboard(tmp_path: Path) -> None:
    """A run whose components do not use torch (the toy world, an LLM-teacher-only set-up) does not
    pay torch's import (about 2 s of CPU) just to log its metrics, nor tensorboard's (a quarter of
    a second, paid by every run)."""
    pytest.importorskip("tensorboard", reason="the dev extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code = ("import sys; from pathlib import Path; from coevolve_sdk.run.tensorboard import TensorBoard; "
            f"tb = TensorBoard(Path({str(tmp_path)!r})); tb.write(1, {{'a/b': 0.5}}); tb.write(2, {{'a/b': 0.25}}); tb.close(); "
            "print('torch' in sys.modules or 'tensorboard' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", "writing TensorBoard scalars imported torch or tensorboard"
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("a/b")] == [(1, 0.5), (2, 0.25)]


def test_records_carry_the_checksums_tensorboard_verifies() -> None:
    pytest.importorskip("tensorboard", reason="the dev extra installs tensorboard")
    import random

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from coevolve_sdk.run.tensorboard import _masked_crc32c

    rng = random.Random(0)
    for n in (0, 1, 8, 255, 4096):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert _masked_crc32c(data) == masked_crc32c(data), n


def test_a_resumed_run_adds_its_steps_to_the_same_curves(tmp_path: Path) -> None:
    """A resumed run writes a second event file; TensorBoard reads both as one run."""
    pytest.importorskip("tensorboard", reason="the dev extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from coevolve_sdk.run.tensorboard import TensorBoard

    first = TensorBoard(tmp_path)
    first.write(1, {"rollout/reward_mean": 0.25, "pool/size": 8})
    first.close()
    second = TensorBoard(tmp_path)
    second.write(2, {"rollout/reward_mean": 0.5, "pool/size": 9})
    second.close()
    assert len(list(tmp_path.iterdir())) == 2
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("rollout/reward_mean")] == [(1, 0.25), (2, 0.5)]
    assert [e.value for e in acc.Scalars("pool/size")] == [8, 9]
