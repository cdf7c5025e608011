"""Ctrl-C that a run cannot lose.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to
be. When that is inside a finaliser (``__del__``, a weakref or garbage-collector callback),
CPython prints "Exception ignored" and carries on: the user pressed Ctrl-C and the run went on
to the end. So ``coevolve run`` also records the request, and the loop checks it at every step
boundary; an interrupt swallowed mid-step still stops the run one step later, after the step's
records are committed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["catch_interrupts", "raise_if_interrupted"]

_requested = threading.Event()


def _handler(signum: int, frame: FrameType | None) -> None:
    _requested.set()
    raise KeyboardInterrupt


@contextmanager
def catch_interrupts() -> Iterator[None]:
    """Record SIGINT while the block runs (and still raise ``KeyboardInterrupt`` at once).

    A no-op off the main thread, where Python does not allow signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _requested.clear()
    previous = signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if Ctrl-C was pressed since ``catch_interrupts`` began."""
    if _requested.is_set():
        raise KeyboardInterrupt
