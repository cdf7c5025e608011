"""A run's step metrics as TensorBoard scalars (``RUN_DIR/tensorboard``).

The event file is written here, not with tensorboard's own writer: a scalar needs a few bytes of
protocol-buffer encoding in a length-and-checksum-framed record, while importing tensorboard's
writer costs about a quarter of a second of CPU per run (it pulls in protobuf, and boto3 where
that is installed) and needs tensorboard installed at all. TensorBoard reads these files like its
own (``tests/core/test_tensorboard.py`` reads them with tensorboard's event accumulator).

Format: a sequence of TFRecords (little-endian uint64 length, masked CRC-32C of those 8 bytes,
the payload, masked CRC-32C of the payload), each payload an ``Event`` message; the first one
names the file version, every later one holds one step's scalars as ``Summary.Value``s with a
``simple_value``.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any, BinaryIO

from coevolve_sdk.storage.diskspace import DiskFull, disk_full_cause, writing

__all__ = ["TensorBoard"]


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()
_FILES = itertools.count()  # a second writer in one process and second gets a file of its own


def _masked_crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, masked the way TFRecord stores it."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 fields encode negatives as ten-byte two's complement
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings and embedded messages."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, *, file_version: str | None = None, scalars: dict[str, float] | None = None) -> bytes:
    """An ``Event``: wall_time (1, double), step (2, int64), file_version (3) or summary (5)."""
    msg = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step)
    if file_version is not None:
        msg += _field(3, file_version.encode())
    if scalars:
        # Summary.value (1) repeated; Summary.Value: tag (1, string), simple_value (2, float)
        values = b"".join(_field(1, _field(1, k.encode()) + b"\x15" + struct.pack("<f", float(v))) for k, v in scalars.items())
        msg += _field(5, values)
    return msg


def _record(payload: bytes) -> bytes:
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", _masked_crc32c(length)) + payload + struct.pack("<I", _masked_crc32c(payload))


class TensorBoard:
    """Step metrics as TensorBoard scalars under ``RUN_DIR/tensorboard``: one event file per
    process that writes (a resumed run adds a file; TensorBoard merges a folder's files by step).
    A full disk stops the run like any other write to the run folder; no other failure does."""

    def __init__(self, logdir: Any) -> None:
        self.logdir = Path(logdir)
        self._file: BinaryIO | None = None
        self._failed = False

    def _open(self) -> BinaryIO:
        self.logdir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_FILES)}"
        f = open(self.logdir / name, "wb")  # noqa: SIM115 - kept open for the run's life, closed in close()
        f.write(_record(_event(time.time(), 0, file_version="brain.Event:2")))
        return f

    def write(self, step: int, metrics: dict[str, float]) -> None:
        if self._failed or not metrics:
            return
        try:
            with writing("the TensorBoard logs", self.logdir):  # a full disk stops the run; nothing else does
                if self._file is None:
                    self._file = self._open()
                self._file.write(_record(_event(time.time(), step, scalars=metrics)))
                self._file.flush()
        except DiskFull:
            raise
        except OSError:
            self._failed = True  # the logs are a convenience: the store holds every metric

    def close(self) -> None:
        if self._file is not None:
            f, self._file = self._file, None
            try:
                f.close()  # flushes: on a full disk that fails again, and must not hide the first error
            except Exception as e:
                if disk_full_cause(e, self.logdir) is None:
                    raise
