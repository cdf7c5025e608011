"""A run's step metrics as TensorBoard scalars (``RUN_DIR/tensorboard``), when tensorboard is installed."""

from __future__ import annotations

import time
from typing import Any

from coevolve_sdk.storage.diskspace import DiskFull, disk_full_cause, writing

__all__ = ["TensorBoard"]


class TensorBoard:
    """Step metrics as TensorBoard scalars under ``RUN_DIR/tensorboard`` when tensorboard is
    installed (the dev extra installs it); silently nothing otherwise.

    Written with tensorboard's own event-file writer (the one ``torch.utils.tensorboard`` wraps),
    so a run whose components do not use torch never imports it (about 2 s of CPU per run)."""

    def __init__(self, logdir: Any) -> None:
        self.logdir = logdir
        self._writer: Any = None

    def write(self, step: int, metrics: dict[str, float]) -> None:
        if self._writer is False:
            return
        if self._writer is None:
            try:
                from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: PLC0415

                with writing("the TensorBoard logs", self.logdir):  # a full disk stops the run; nothing else does
                    self._writer = EventFileWriter(str(self.logdir))
            except DiskFull:
                raise
            except Exception:
                self._writer = False
                return
        from tensorboard.compat.proto.event_pb2 import Event  # noqa: PLC0415
        from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: PLC0415

        now = time.time()
        with writing("the TensorBoard logs", self.logdir):
            for k, v in metrics.items():
                value = Summary.Value(tag=k, simple_value=float(v))
                self._writer.add_event(Event(wall_time=now, step=step, summary=Summary(value=[value])))
            self._writer.flush()

    def close(self) -> None:
        if self._writer:
            try:
                self._writer.close()  # flushes: on a full disk that fails again, and must not hide the first error
            except Exception as e:
                if disk_full_cause(e, self.logdir) is None:
                    raise
