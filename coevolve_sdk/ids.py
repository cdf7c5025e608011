"""Record ids that a resumed run gives out exactly as an uninterrupted one does.

Ids of trajectories, signals, candidates and synthetic tasks are random by default. Inside an
``id_stream(...)`` block they are drawn from a stream named by the block's key instead: the
n-th id of the stream is a hash of (key, n). The loop opens a stream for each unit of work that
a resume may replay (a step's rollouts, its signals, one signal of an evolution round, an
evaluation), so the replayed unit hands out the same ids as the first attempt, and a run that
was killed and resumed ends with the same records, ids included, as one that was not.

The stream lives in a context variable: it belongs to the thread that opened it. Work handed to
another thread opens its own stream there (the evolution round does, per signal); code running
in a thread without a stream gets random ids, which is correct, only not reproducible.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["id_stream", "new_id"]


class _Stream:
    def __init__(self, key: str) -> None:
        self.key = key
        self.count = 0
        self.lock = threading.Lock()

    def next(self, prefix: str) -> str:
        with self.lock:
            n = self.count
            self.count += 1
        return f"{prefix}-{hashlib.sha256(f'{self.key}#{n}'.encode()).hexdigest()[:12]}"


_current: ContextVar[_Stream | None] = ContextVar("coevolve_id_stream", default=None)


@contextmanager
def id_stream(*key: object) -> Iterator[None]:
    """Draw the ids created in this block (in this thread) from the stream named ``key``."""
    token = _current.set(_Stream(":".join(str(k) for k in key)))
    try:
        yield
    finally:
        _current.reset(token)


def new_id(prefix: str) -> str:
    """A short id; the prefix makes ids readable in logs and the pool listing."""
    stream = _current.get()
    if stream is not None:
        return stream.next(prefix)
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
