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

__all__ = ["write_checkpoint", "latest_checkpoint", "read_state"]


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


def write_checkpoint(root: Path, step: int, state: dict[str, Any], save_extra: Callable[[Path], None], keep: int = 2) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f"step-{step:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_extra(tmp)
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
    # prune old checkpoints (never the one just written)
    done = sorted(p for p in root.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp"))
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob("step-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    return final


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
