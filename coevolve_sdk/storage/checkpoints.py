"""Atomic, verifiable checkpoints: a checkpoint folder is either complete and intact or not used.

Each checkpoint is written to ``step-NNNNNN.tmp``; at commit the main process writes
``state.json`` and ``manifest.json`` (the size and SHA-256 of every file, flushed to disk),
renames the folder to ``step-NNNNNN`` and only then points ``latest`` at it (replaced
atomically). A kill at any point leaves the previous checkpoint intact. On resume the newest
folder whose files still match its manifest is used; a damaged one (a truncated weights file,
an edited ``state.json``) is set aside as ``step-NNNNNN.damaged`` and the one before it is used,
and the run says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import coevolve_sdk.kill_points as killpoints
from coevolve_sdk.storage.diskspace import writing

__all__ = [
    "begin_checkpoint", "commit_checkpoint", "save_checkpoint", "write_checkpoint", "latest_checkpoint", "read_state", "tmp_path",
    "checkpoints_newest_first", "newest_intact", "verify_checkpoint", "set_aside", "MANIFEST",
]

MANIFEST = "manifest.json"
_NAME = re.compile(r"^step-(\d{6,})$")


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


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def commit_checkpoint(root: Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state.json`` and the manifest into the tmp folder, rename it into place, point
    ``latest`` at it and prune old checkpoints (main process only, after every process has
    saved its share)."""
    tmp = tmp_path(root, step)
    final = root / f"step-{step:06d}"
    with open(tmp / "state.json", "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    files: dict[str, dict[str, Any]] = {}
    for p in _files(tmp):
        _fsync_file(p)  # the algorithm's files too: the manifest must never describe unwritten data
        files[p.relative_to(tmp).as_posix()] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    with open(tmp / MANIFEST, "w") as f:
        json.dump({"format": 1, "step": step, "run_id": state.get("run_id"), "files": files}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    killpoints.reached("checkpoint_commit")
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    killpoints.reached("checkpoint_renamed")
    pointer_tmp = root / "latest.tmp"
    pointer_tmp.write_text(final.name)
    os.replace(pointer_tmp, root / "latest")
    _fsync_dir(root)
    done = [p for p in checkpoints_newest_first(root)]
    for old in done[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob("step-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    return final


def save_checkpoint(root: Path, step: int, algorithm: Any, state: Callable[[], dict[str, Any]], keep: int = 2) -> None:
    """Every process of a run: each saves its share of the algorithm's state (per-rank RNG
    states, say) into the same tmp folder; only then does the main process commit it, with
    ``state()`` (called on the main process only) as its ``state.json``."""
    main = algorithm.processes.is_main_process
    tmp = tmp_path(root, step)
    # a full disk: the half-written folder is removed at once (its space is the first to free),
    # the previous checkpoint stays the newest, and the error says what needs room where
    with writing(f"the checkpoint of step {step}", tmp, cleanup=(lambda: shutil.rmtree(tmp, ignore_errors=True)) if main else None):
        if main:
            begin_checkpoint(root, step)
            killpoints.reached("checkpoint_begun")
        algorithm.processes.barrier()
        algorithm.save(tmp / "algorithm")
        algorithm.processes.barrier()
        if main:
            killpoints.reached("checkpoint_saved")
            commit_checkpoint(root, step, state(), keep=keep)
    algorithm.processes.barrier()


def write_checkpoint(root: Path, step: int, state: dict[str, Any], save_extra: Callable[[Path], None], keep: int = 2) -> Path:
    """One-process form: begin, let ``save_extra`` fill the folder, commit."""
    tmp = tmp_path(root, step)
    with writing(f"the checkpoint of step {step}", tmp, cleanup=lambda: shutil.rmtree(tmp, ignore_errors=True)):
        begin_checkpoint(root, step)
        save_extra(tmp)
        return commit_checkpoint(root, step, state, keep)


def checkpoints_newest_first(root: Path) -> list[Path]:
    """Committed checkpoint folders (``step-NNNNNN``), newest first, intact or not."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)), reverse=True)  # type: ignore[union-attr]


def verify_checkpoint(ckpt: Path) -> str | None:
    """What is wrong with ``ckpt`` (a sentence), or None when it is intact.

    A checkpoint written before manifests existed (coevolve-sdk up to fa4cf36) is checked for a
    readable ``state.json`` only."""
    try:
        state = read_state(ckpt)
    except FileNotFoundError:
        return "state.json is missing"
    except (OSError, ValueError) as e:
        return f"state.json cannot be read ({type(e).__name__}: {e})"
    if not isinstance(state, dict) or "step" not in state:
        return "state.json does not hold a checkpoint state"
    manifest_path = ckpt / MANIFEST
    if not manifest_path.exists():
        return "manifest.json is missing" if int(state.get("format", 1)) >= 2 else None
    try:
        manifest = json.loads(manifest_path.read_text())
        files: dict[str, dict[str, Any]] = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"manifest.json cannot be read ({type(e).__name__}: {e})"
    for rel, want in files.items():
        p = ckpt / rel
        if not p.is_file():
            return f"{rel} is missing"
        size = p.stat().st_size
        if size != want.get("size"):
            return f"{rel} has {size} bytes, the manifest says {want.get('size')}"
        if _sha256(p) != want.get("sha256"):
            return f"{rel} does not match its checksum"
    return None


def set_aside(ckpt: Path) -> Path:
    """Rename a damaged checkpoint out of the way (never delete it: it is evidence)."""
    target = ckpt.with_name(f"{ckpt.name}.damaged")
    if target.exists():
        target = ckpt.with_name(f"{ckpt.name}.damaged-{int(time.time())}")
    os.replace(ckpt, target)
    pointer = ckpt.parent / "latest"
    if pointer.exists() and pointer.read_text().strip() == ckpt.name:
        newest = checkpoints_newest_first(ckpt.parent)
        if newest:
            tmp = ckpt.parent / "latest.tmp"
            tmp.write_text(newest[0].name)
            os.replace(tmp, pointer)
        else:
            pointer.unlink()
    return target


def newest_intact(root: Path, on_damaged: Callable[[Path, str], None]) -> Path | None:
    """The newest checkpoint under ``root`` whose files match their manifest; each damaged one
    on the way is handed to ``on_damaged(path, problem)`` first (resume sets it aside, evaluation
    only says so). None when there is no intact one."""
    for ckpt in checkpoints_newest_first(root):
        problem = verify_checkpoint(ckpt)
        if problem is None:
            return ckpt
        on_damaged(ckpt, problem)
    return None


def latest_checkpoint(root: Path) -> Path | None:
    """The newest committed checkpoint with a state file (no checksum verification: resume and
    evaluation verify, through ``checkpoints_newest_first`` and ``verify_checkpoint``)."""
    pointer = root / "latest"
    if pointer.exists():
        p = root / pointer.read_text().strip()
        if (p / "state.json").exists():
            return p
    done = [p for p in checkpoints_newest_first(root) if (p / "state.json").exists()]
    return done[0] if done else None


def read_state(ckpt: Path) -> dict[str, Any]:
    return json.loads((ckpt / "state.json").read_text())
