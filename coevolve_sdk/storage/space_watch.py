"""Room for the next checkpoint interval: measured before each checkpoint, said once when short,
and named in the one message a full disk stops the run with."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from coevolve_sdk.storage.checkpoints import latest_checkpoint
from coevolve_sdk.storage.diskspace import DiskFull, disk_full_cause, folder_size, free_bytes, human

__all__ = ["SpaceWatch"]


class SpaceWatch:
    """Before each checkpoint: is there room for the next checkpoint interval?

    The next interval needs about the last checkpoint's size (a new one is written before the
    oldest kept one is removed) plus the store's growth per step times the steps to the next
    checkpoint. When the free space is less than ``margin`` intervals' worth, ``check`` returns a
    warning, once per process: early enough to free space while the run goes on."""

    def __init__(self, run_dir: Path, checkpoint_every: int = 1, margin: float = 2.0) -> None:
        self.run_dir, self.every, self.margin = Path(run_dir), checkpoint_every, margin
        self.warned = False
        self._store_at: tuple[int, int] | None = None  # (step, store bytes) at the last check
        self.growth_per_step = 0.0
        self.checkpoint_bytes = 0

    def store_bytes(self) -> int:
        db = self.run_dir / "run.sqlite"
        return sum(p.stat().st_size for p in (db, db.with_name("run.sqlite-wal")) if p.exists())

    def observe(self, step: int, last_checkpoint: Path | None) -> None:
        """Update the estimate at ``step`` (the store now, the newest checkpoint's size)."""
        size = self.store_bytes()
        if self._store_at is not None and step > self._store_at[0]:
            self.growth_per_step = max(self.growth_per_step, (size - self._store_at[1]) / (step - self._store_at[0]), 0.0)
        self._store_at = (step, size)
        if last_checkpoint is not None and last_checkpoint.is_dir():
            self.checkpoint_bytes = folder_size(last_checkpoint)

    def needed(self, steps_to_next: int) -> int | None:
        """About what the next checkpoint interval writes; None before anything was measured."""
        if not self.checkpoint_bytes and not self.growth_per_step:
            return None
        return int(self.checkpoint_bytes + self.growth_per_step * max(steps_to_next, 1))

    def check(self, steps_to_next: int) -> str | None:
        """A warning (once) when the free space is below ``margin`` times what the next interval needs."""
        need = self.needed(steps_to_next)
        free = free_bytes(self.run_dir)
        if self.warned or need is None or free is None or free >= self.margin * need:
            return None
        self.warned = True
        return (f"warning: the disk holding {self.run_dir} is nearly full: {human(free)} free, and each checkpoint interval "
                f"needs about {human(need)} (the last checkpoint, {human(self.checkpoint_bytes)}, plus the store's growth, "
                f"{human(self.growth_per_step)} per step, over {steps_to_next} steps). Free some space now: when the disk "
                f"is full the run stops, and `coevolve run --resume {self.run_dir}` continues it once there is room.")

    def before_checkpoint(self, step: int, warn: Callable[[str], None], note: Callable[[int, str], None]) -> None:
        """The loop, before writing the checkpoint of ``step``: measure, and warn (console and report) once when short."""
        self.observe(step, latest_checkpoint(self.run_dir / "checkpoints"))
        text = self.check(self.every)
        if text is not None:
            warn(text)
            note(step, text)

    @contextmanager
    def stopping(self, step: Callable[[], int]) -> Iterator[None]:
        """Around a whole run: a disk-full failure anywhere becomes one ``DiskFull`` naming this run's
        folder, the checkpoint a resume starts from and what the next interval needs."""
        try:
            yield
        except Exception as e:
            code = disk_full_cause(e, self.run_dir)
            if code is None:
                raise
            found = next((x for x in (e, e.__cause__, e.__context__) if isinstance(x, DiskFull)), None)
            if found is None:  # a write no site named: say where the run was
                found = DiskFull(f"the run folder (at step {step()})", self.run_dir, code, f"{type(e).__name__}: {e}")
            ckpt = latest_checkpoint(self.run_dir / "checkpoints")
            if not self.checkpoint_bytes and ckpt is not None:  # stopped before this process measured a checkpoint
                self.observe(step(), ckpt)
            raise found.with_run(self.run_dir, self.needed(self.every), ckpt.name if ckpt is not None else None) from e
