"""Atomic checkpoints: a checkpoint folder is either complete or absent.

Each checkpoint is written to ``step-NNNNNN.tmp``, flushed, renamed to ``step-NNNNNN`` and only
then recorded in ``latest`` (replaced atomically). A kill at any point leaves the previous
checkpoint intact and ``latest`` pointing at a complete folder.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

__all__ = ["begin_checkpoint", "commit_checkpoint", "write_checkpoint", "latest_checkpoint", "read_state", "tmp_path"]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def begin_checkpoint(root: Path, step: int) -> Path:
    """Create an empty ``step-NNNNNN.tmp`` folder (main process only) and return its path."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f"step-{step:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


def tmp_path(root: Path, step: int) -> Path:
    """Where every process writes its share of checkpoint ``step`` before it is committed."""
    return root / f"step-{step:06d}.tmp"


def commit_checkpoint(root: Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state.json`` into the tmp folder, rename it into place, point ``latest`` at it
    and prune old checkpoints (main process only, after every process has saved its share)."""
    tmp = tmp_path(root, step)
    final = root / f"step-{step:06d}"
    with open(tmp / "state.json", "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    pointer_tmp = root / "latest.tmp"
    pointer_tmp.write_text(final.name)
    os.replace(pointer_tmp, root / "latest")
    _fsync_dir(root)
    done = sorted(p for p in root.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp"))
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob("step-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    return final


def write_checkpoint(root: Path, step: int, state: dict[str, Any], save_extra: Callable[[Path], None], keep: int = 2) -> Path:
    """One-process form: begin, let ``save_extra`` fill the folder, commit."""
    tmp = begin_checkpoint(root, step)
    save_extra(tmp)
    return commit_checkpoint(root, step, state, keep)


def latest_checkpoint(root: Path) -> Path | None:
    pointer = root / "latest"
    if pointer.exists():
        p = root / pointer.read_text().strip()
        if (p / "state.json").exists():
            return p
    done = sorted(p for p in root.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp") and (p / "state.json").exists())
    return done[-1] if done else None


def read_state(ckpt: Path) -> dict[str, Any]:
    return json.loads((ckpt / "state.json").read_text())
