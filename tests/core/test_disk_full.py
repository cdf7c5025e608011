"""A run on a real, size-limited filesystem (a tmpfs) that fills up: at a checkpoint (after an early
warning) and in the store. Each time `coevolve run` stops with exit status 75 and a short message
(what was written, where, the free space, what the run needs, how to continue; no traceback); once
space is freed, `coevolve run --resume` continues, and the run ends exactly where an uninterrupted
run ends (the comparison of tests/core/test_resume_exact.py: weights, pool, rounds, signals,
trajectories, evaluations, metrics).

Mounting needs root (CI runs as root); elsewhere the test is skipped and says why.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from coevolve_sdk.storage.diskspace import EXIT_DISK_FULL
from tests.conftest import REPO, coevolve_cmd
from tests.core.test_diskspace import tmpfs
from tests.core.test_resume_exact import CONFIG, SETTINGS as EXACT, _compare, _sets, final_state

# trajectories older than 2 steps lose their turns (store.keep_trajectory_steps): the comparison
# then also shows that a resumed run prunes exactly what an uninterrupted one does
SETTINGS = {**EXACT, "store.keep_trajectory_steps": 2}

pytest.importorskip("torch")
pytest.importorskip("safetensors")


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 16 MB tmpfs (a run folder of this test needs about 7 MB), unmounted afterwards."""
    unmount = tmpfs(tmp_path / "small", "16m")
    try:
        yield tmp_path / "small"
    finally:
        unmount()


def _run(args: list[str], env: dict[str, str], fill_at: str | None = None, filler: Path | None = None,
         leave: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for k in ("COEVOLVE_TEST_KILL_AT", "COEVOLVE_TEST_FILL_DISK_AT", "COEVOLVE_TEST_FILL_DISK", "COEVOLVE_TEST_FILL_DISK_LEAVE"):
        env.pop(k, None)
    if fill_at is not None:
        env.update({"COEVOLVE_TEST_FILL_DISK_AT": fill_at, "COEVOLVE_TEST_FILL_DISK": str(filler),
                    "COEVOLVE_TEST_FILL_DISK_LEAVE": str(leave)})
    return subprocess.run([*coevolve_cmd(), *args, "-q"], capture_output=True, text=True, env=env, timeout=900)


def _shape(text: str, run: Path) -> str:
    """A message with its run folder and sizes left out, in one line (the docs wrap it)."""
    text = text.replace(str(run), "RUN").replace("/tmp/df/small/run", "RUN")
    return " ".join(re.sub(r"\d+(\.\d+)? (bytes|KB|MB|GB)", "SIZE", text).split())


def _quoted_in_docs(message: str, run: Path) -> None:
    page = (REPO / "docs" / "run-folder.md").read_text()
    assert _shape(message, run) in _shape(page, run), f"docs/run-folder.md does not quote this message:\n{message}"


def _stopped_for_room(out: subprocess.CompletedProcess[str], run: Path) -> str:
    assert out.returncode == EXIT_DISK_FULL, f"exit {out.returncode}, expected {EXIT_DISK_FULL}:\n{out.stderr[-4000:]}"
    err = out.stderr
    assert "Traceback" not in err, err
    assert "No space left on device while writing" in err, err
    assert "free there" in err and f"`coevolve run --resume {run}`" in err, err
    assert len(err.strip().splitlines()) <= 3, err  # a short message, not a page
    _quoted_in_docs(err.strip(), run)
    return err


@pytest.mark.slow
def test_a_full_disk_stops_the_run_clearly_and_the_resume_is_exact(tmp_path: Path, small_disk: Path,
                                                                    sub_env: dict[str, str]) -> None:
    whole, run, filler = tmp_path / "whole", small_disk / "run", small_disk / "filler"
    assert _run(["run", str(CONFIG), "--set", f"run_dir={whole}", *_sets(SETTINGS)], sub_env).returncode == 0

    # the disk fills up while steps 3 and 4 train, leaving 1 MB: the step-4 checkpoint (2 MB)
    # is announced as not fitting, then fails
    out = _run(["run", str(CONFIG), "--set", f"run_dir={run}", *_sets(SETTINGS)], sub_env,
               fill_at="step_recorded:3", filler=filler, leave=1 << 20)
    err = _stopped_for_room(out, run)
    assert "while writing the checkpoint of step 4" in err and "(from step-000002)" in err, err
    assert "the run needs about" in err, err
    warning = [ln for ln in out.stdout.splitlines() if "is nearly full" in ln]
    assert len(warning) == 1 and "coevolve run --resume" in warning[0], out.stdout[-3000:]
    _quoted_in_docs(warning[0].split("] ", 1)[1], run)
    assert not list((run / "checkpoints").glob("*.tmp")), "the half-written checkpoint was left behind"
    assert (run / "checkpoints" / "latest").read_text() == "step-000002"

    # space freed (the filler deleted); the resumed run fills the disk again, now in the store
    filler.unlink()
    out = _run(["run", "--resume", str(run)], sub_env, fill_at="step_recorded:1", filler=filler)
    err = _stopped_for_room(out, run)
    assert f"while writing the run's store ({run / 'run.sqlite'})" in err and "the run needs about" in err, err

    # space freed by enlarging the filesystem; the resume ends where the uninterrupted run ended
    grown = subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], capture_output=True, text=True)
    assert grown.returncode == 0, grown.stderr
    out = _run(["run", "--resume", str(run)], sub_env)
    assert out.returncode == 0, out.stderr[-4000:]
    _compare(final_state(whole), final_state(run))
    assert not list((run / "checkpoints").glob("*.tmp"))
