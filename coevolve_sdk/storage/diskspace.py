"""A full disk stops a run with a message a person can act on, and is announced before it happens.

Multi-day runs meet full disks (and exceeded quotas, and filesystems remounted read-only). The
write that fails can be anywhere: SQLite's write-ahead log, a safetensors file of a checkpoint,
the report, TensorBoard's event file, an experiment's log. Each library says it its own way
(``OSError`` with ``errno.ENOSPC``, ``sqlite3.OperationalError: database or disk is full``,
``SafetensorError: ... No space left on device (os error 28)``, torch's ``unexpected pos``),
and a 100-line traceback ending in one of them tells nobody which folder is full, how much room
the run needs, or that the run folder is intact and ``coevolve run --resume`` continues it.

This module recognises all of them (``disk_full_cause``), turns them into one error,
``DiskFull`` (what was being written, where, the free space there, about how much the run needs,
and how to continue), which ``coevolve run`` prints without a traceback and exits with
``EXIT_DISK_FULL``; and ``space_watch.SpaceWatch`` estimates what the next checkpoint interval needs (the
last checkpoint's size plus the store's growth per step) so that the run warns once, early,
while there is still room (docs/run-folder.md, "When the disk fills").
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from coevolve_sdk.errors import CoEvolveError

__all__ = ["DiskFull", "EXIT_DISK_FULL", "disk_full_cause", "writing", "free_bytes", "human", "folder_size",
           "stops_cleanly"]

#: exit status of ``coevolve run`` (and ``coevolve experiment``) stopped by a full disk, an
#: exceeded quota or a read-only filesystem: sysexits' EX_TEMPFAIL ("try again later"), since
#: the run continues with ``--resume`` once there is room
EXIT_DISK_FULL = 75

_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only file system"}
# how libraries that do not raise OSError say the same (safetensors and torch pass on the OS's text)
_TEXTS = {
    "no space left on device": errno.ENOSPC, "os error 28": errno.ENOSPC, "database or disk is full": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT, "os error 122": errno.EDQUOT,
    "read-only file system": errno.EROFS, "os error 30": errno.EROFS,
}
_SQLITE_FULL, _SQLITE_READONLY = 13, 8
#: below this much free space an error that names no cause ("file write failed") is taken for a full disk
_NEARLY_FULL = 1 << 20


def free_bytes(path: str | Path) -> int | None:
    """Free space (for this user) on the filesystem holding ``path`` or its nearest existing parent."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def _read_only_fs(path: str | Path) -> bool:
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def human(n: float | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        todo += [x.__cause__, x.__context__]


def disk_full_cause(e: BaseException, where: str | Path | None = None) -> int | None:
    """The errno (ENOSPC, EDQUOT or EROFS) when ``e`` or an exception it came from is a write that
    failed for lack of space, quota or a writable filesystem; None otherwise. ``where``: the folder
    written, for errors that name no cause (torch's "file write failed" on a nearly full disk)."""
    for x in _chain(e):
        if isinstance(x, DiskFull):
            return x.errno
        if isinstance(x, OSError) and x.errno in _ERRNOS:
            return x.errno
        if isinstance(x, sqlite3.Error):
            code = getattr(x, "sqlite_errorcode", None)
            if code is not None and code & 0xFF == _SQLITE_FULL:
                return errno.ENOSPC
            # SQLite says "readonly database" also for a store opened read-only on purpose: only a
            # filesystem that really is read-only counts
            if code is not None and code & 0xFF == _SQLITE_READONLY and where is not None and _read_only_fs(where):
                return errno.EROFS
        text = str(x).lower()
        for needle, code in _TEXTS.items():
            if needle in text:
                return code
        # torch.save on a full disk: "file write failed", or "unexpected pos 704 vs 598" (its zip writer)
        if where is not None and isinstance(x, (OSError, RuntimeError, sqlite3.Error)) and any(
                w in text for w in ("write", "i/o", "unexpected pos")):
            free = free_bytes(where)
            if free is not None and free < _NEARLY_FULL:
                return errno.ENOSPC
    return None


class DiskFull(CoEvolveError):
    """A write of the run failed for lack of space (or quota, or a writable filesystem).

    The run folder is left as a kill would leave it, so it stays resumable and the resume is
    exact; the message says what was written where, the free space, about how much is needed
    and the command that continues the run. ``coevolve run`` exits with ``EXIT_DISK_FULL``."""

    def __init__(self, what: str, path: str | Path, errno_: int = errno.ENOSPC, detail: str = "", *,
                 needed: int | None = None, run_dir: str | Path | None = None, resume_from: str | None = None) -> None:
        self.what, self.path, self.errno, self.detail = what, Path(path), errno_, detail
        self.needed, self.run_dir, self.resume_from = needed, (Path(run_dir) if run_dir is not None else None), resume_from
        super().__init__(self._message())

    def with_run(self, run_dir: str | Path, needed: int | None, resume_from: str | None) -> "DiskFull":
        """The same failure with what the loop knows: the run folder, the estimate, the checkpoint to resume from."""
        return DiskFull(self.what, self.path, self.errno, self.detail, needed=self.needed or needed, run_dir=run_dir,
                        resume_from=resume_from)

    def __reduce__(self):  # type: ignore[no-untyped-def]  # crosses process boundaries (evolution workers)
        return (_rebuild, (self.what, str(self.path), self.errno, self.detail, self.needed,
                           None if self.run_dir is None else str(self.run_dir), self.resume_from))

    def _message(self) -> str:
        cause = _ERRNOS.get(self.errno, os.strerror(self.errno)).capitalize()
        free = free_bytes(self.path)
        if self.errno == errno.EROFS:
            room = f"{self.path} is on a read-only filesystem"
        else:
            room = f"{human(free)} free there"
            if self.errno == errno.EDQUOT:
                room += " (your quota may be smaller)"
        need = f"; the run needs about {human(self.needed)} free to reach its next checkpoint" if self.needed else ""
        folder = self.run_dir if self.run_dir is not None else "RUN_DIR"
        back = f" (from {self.resume_from})" if self.resume_from else ""
        return (f"{cause} while writing {self.what} ({self.path}): {room}{need}. The run stopped and its folder is intact. "
                f"Free some space (or raise the quota, or make the filesystem writable), then continue the run with "
                f"`coevolve run --resume {folder}`{back}; it ends exactly as if it had not stopped.")


def _rebuild(what: str, path: str, errno_: int, detail: str, needed: int | None, run_dir: str | None,
             resume_from: str | None) -> DiskFull:
    return DiskFull(what, path, errno_, detail, needed=needed, run_dir=run_dir, resume_from=resume_from)


@contextmanager
def writing(what: str, path: str | Path, cleanup: Callable[[], None] | None = None) -> Iterator[None]:
    """Turn a disk-full failure of the writes inside into ``DiskFull(what, path)``; anything else
    passes unchanged. ``cleanup`` runs first (removing a half-written folder frees its space)."""
    try:
        yield
    except DiskFull:
        if cleanup is not None:
            cleanup()
        raise
    except Exception as e:
        code = disk_full_cause(e, path)
        if code is None:
            raise
        if cleanup is not None:
            cleanup()
        raise DiskFull(what, path, code, f"{type(e).__name__}: {e}") from e


def folder_size(path: Path) -> int:
    """Bytes in the files under ``path`` (0 when it does not exist)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def stops_cleanly(run: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates ``CoEvolveLoop.run``: its ``space.stopping`` around the whole run (kept out of loop.py)."""

    @functools.wraps(run)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.space.stopping(lambda: self.step):
            return run(self, *args, **kwargs)

    return wrapper
