"""Each library's way of saying "the disk is full" is recognised and becomes one DiskFull message.

Real failures: safetensors and torch writing to a 1 MB tmpfs (root only, as CI runs; skipped
otherwise), SQLite reaching its page limit (``PRAGMA max_page_count`` makes SQLite report
SQLITE_FULL exactly as on a full disk; no root needed). tests/core/test_disk_full.py fills a real
filesystem under a whole run."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from coevolve_sdk.storage.diskspace import DiskFull, disk_full_cause, writing
from coevolve_sdk.storage.space_watch import SpaceWatch
from coevolve_sdk.storage.store import RunStore, StoreDamaged
from tests.core.test_store_compression import _chatty

def tmpfs(mnt: Path, size: str):  # type: ignore[no-untyped-def]
    """Mount a tmpfs of ``size`` on ``mnt`` (root only; skips saying why otherwise); returns how to unmount it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs the tests as root)")
    if shutil.which("mount") is None:
        pytest.skip("no `mount` command to mount a size-limited tmpfs")
    mnt.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip()}): a container without CAP_SYS_ADMIN?")
    return lambda: subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_safetensors_and_torch_on_a_full_filesystem(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    unmount = tmpfs(tmp_path / "small", "1m")
    try:
        target = tmp_path / "small" / "model.safetensors"
        with pytest.raises(DiskFull) as caught:
            with writing("the checkpoint of step 4", target):
                st.save_file({"w": torch.zeros(1 << 20)}, str(target))  # 4 MB into 1 MB
        msg = str(caught.value)
        assert msg.startswith(f"No space left on device while writing the checkpoint of step 4 ({target})"), msg
        assert "`coevolve run --resume RUN_DIR`" in msg and "free there" in msg
        target.unlink(missing_ok=True)
        with pytest.raises(Exception) as raw:
            torch.save({"w": torch.zeros(1 << 20)}, str(tmp_path / "small" / "state.pt"))
        assert disk_full_cause(raw.value, tmp_path / "small") == errno.ENOSPC
    finally:
        unmount()


def test_the_store_at_its_limit_says_disk_full_and_keeps_what_it_had(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    store.record_step(1, [_chatty(1)], [], {"rollout/reward_mean": 0.5})
    pages = store._query("PRAGMA page_count")[0][0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(DiskFull) as caught:
        store.record_step(2, [_chatty(i, turns=200).model_copy(update={"id": f"t2-{i}", "step": 2}) for i in range(20)], [],
                          {"rollout/reward_mean": 0.5})
    assert "while writing the run's store" in str(caught.value) and not isinstance(caught.value, StoreDamaged)
    assert store.steps_done() == [1]  # the failed step rolled back whole
    store.close()
    assert RunStore(tmp_path / "run.sqlite", check=True).steps_done() == [1]  # and the file is intact


def test_other_errors_pass_and_each_cause_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        with writing("x", tmp_path):
            raise ValueError("not about space")
    with pytest.raises(PermissionError):  # a permission problem is not a full disk
        with writing("x", tmp_path):
            raise PermissionError(errno.EACCES, "Permission denied")
    ro = DiskFull("the report", tmp_path / "report.html", errno.EROFS)
    assert str(ro).startswith("Read-only file system while writing the report") and "is on a read-only filesystem" in str(ro)
    quota = DiskFull("the run's store", tmp_path / "run.sqlite", errno.EDQUOT, needed=5 << 20)
    assert "Disk quota exceeded" in str(quota) and "your quota may be smaller" in str(quota) and "needs about 5.0 MB free" in str(quota)
    import pickle

    again = pickle.loads(pickle.dumps(quota.with_run(tmp_path, None, "step-000002")))  # crosses worker processes
    assert str(again).endswith(f"`coevolve run --resume {tmp_path}` (from step-000002); it ends exactly as if it had not stopped.")


def test_the_warning_comes_once_and_says_what_is_needed(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints" / "step-000002"
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"\0" * 300_000)
    (tmp_path / "run.sqlite").write_bytes(b"\0" * 10_000)
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    watch = SpaceWatch(tmp_path, margin=2.0)
    watch.observe(2, ckpt)
    assert watch.check(2) is None  # plenty of room on this disk
    (tmp_path / "run.sqlite").write_bytes(b"\0" * 30_000)
    watch.observe(4, ckpt)
    assert watch.growth_per_step == 10_000 and watch.needed(2) == 300_000 + 20_000
    # a disk where less than twice that is free: the same computation with the margin that makes it so
    watch.margin = free / watch.needed(2) + 1
    text = watch.check(2)
    assert text is not None and "is nearly full" in text and "312.5 KB" in text and "coevolve run --resume" in text
    assert watch.check(2) is None  # once


def test_a_finished_run_whose_report_found_no_room_writes_it_on_resume(tmp_path: Path, sub_env: dict[str, str]) -> None:
    from tests.conftest import coevolve_cmd
    from tests.core.test_loop_cli import write_config

    cfg = write_config(tmp_path, **{"training.steps": 2, "training.checkpoint_every": 2, "eval": {"max_tasks": 2}})
    first = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert first.returncode == 0, first.stderr
    report = tmp_path / "run" / "report.html"
    report.unlink()  # as a full disk at the report leaves a finished run
    again = subprocess.run([*coevolve_cmd(), "run", "--resume", str(tmp_path / "run"), "-q"], capture_output=True, text=True,
                           env=sub_env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert report.is_file()
