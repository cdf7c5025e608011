"""One writer per run folder: an exclusive ``flock`` held while a run writes the folder.

Two processes writing one run folder interleave their steps in the store and duplicate tasks
(issue 16, finding 3). ``RunLock`` takes an exclusive, non-blocking ``flock`` on
``RUN_DIR/.coevolve.lock`` and keeps the file open for as long as the run writes; the operating
system drops the lock when the process ends, however it ends (a SIGKILL included), so a lock
is never stale. The holder writes its pid, command line and start time into the file, so the
refused process can say who holds the folder. Reading a run folder (``coevolve eval``,
``report``, ``pool``, ``signals``, an experiment's summary) never takes the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from coevolve_sdk.errors import CoEvolveError

__all__ = ["RunLock", "RunFolderBusy", "LOCK_NAME"]

LOCK_NAME = ".coevolve.lock"


class RunFolderBusy(CoEvolveError):
    """Another live process holds the run folder's lock."""


class RunLock:
    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise ``RunFolderBusy`` naming the process that holds it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunFolderBusy(self._busy_message()) from None
        except BaseException:
            os.close(fd)
            raise
        info = {"pid": os.getpid(), "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        os.close(self._fd)  # closing the descriptor drops the flock
        self._fd = None

    def holder(self) -> dict[str, Any]:
        """What the holder wrote about itself (empty if it could not be read)."""
        try:
            data = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _busy_message(self) -> str:
        who = self.holder()
        folder = self.path.parent
        if who:
            desc = f"process {who.get('pid')} (`{who.get('command', '?')}`, started {who.get('started', '?')})"
        else:
            desc = "another process"
        return (
            f"{folder} is being written by {desc}. One run folder has one writer: wait for that run to finish "
            f"or stop it (Ctrl-C, or kill {who.get('pid', 'PID')}), then `coevolve run --resume {folder}`. "
            f"Reading it meanwhile is fine: `coevolve report`, `coevolve pool list`, `coevolve signals` and `coevolve eval` "
            f"do not need the lock."
        )

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
