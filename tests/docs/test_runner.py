"""The page runner's own guarantees (tests/docs/runner.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.docs.runner import run_bounded


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a child of a process that has exited may linger as a zombie until it is reaped
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def test_a_block_that_times_out_leaves_nothing_running(tmp_path: Path) -> None:
    # a code block such as `coevolve run ...` runs under bash: on a timeout the run itself must
    # stop too, not only the bash (it would otherwise train on for minutes beside the suite)
    pidfile = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["bash", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], timeout=2)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the command's child outlived the timeout"


def test_a_finished_block_returns_its_output_and_status(tmp_path: Path) -> None:
    r = run_bounded(["bash", "-c", "echo out; echo err >&2; exit 3"], timeout=30, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
