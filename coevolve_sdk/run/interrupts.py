"""Ctrl-C and SIGTERM that a run cannot lose.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to
be. When that is inside a finaliser (``__del__``, a weakref or garbage-collector callback),
CPython prints "Exception ignored" and carries on: the user pressed Ctrl-C and the run went on
to the end. So ``coevolve run`` also records the request, and the loop checks it at every step
boundary; an interrupt swallowed mid-step still stops the run one step later.

SIGTERM (what a scheduler, ``kill`` or a container stop sends) is handled the same way: by
default Python dies on it at once, without a word. Here it raises ``Terminated`` (a
``KeyboardInterrupt``), so the run stops as it does on Ctrl-C: open store transactions roll
back, the lock is released, the command to resume is printed, and the exit status is 143.
Stopping mid-step is safe: a resumed run starts from the last checkpoint and replays the rest.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["catch_interrupts", "raise_if_interrupted", "interrupt_signal", "Terminated"]

_requested = threading.Event()
_which: list[str] = []


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM."""


def _handler(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    _which[:] = [name]
    _requested.set()
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


@contextmanager
def catch_interrupts() -> Iterator[None]:
    """Record SIGINT and SIGTERM while the block runs (and still raise at once).

    A no-op off the main thread, where Python does not allow signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _requested.clear()
    _which.clear()
    previous = {sig: signal.signal(sig, _handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` (``Terminated`` after SIGTERM) if a stop was requested since
    ``catch_interrupts`` began."""
    if _requested.is_set():
        raise Terminated if interrupt_signal() == "SIGTERM" else KeyboardInterrupt


def interrupt_signal() -> str | None:
    """``"SIGINT"`` or ``"SIGTERM"``: which signal stopped the run (None if none did)."""
    return _which[0] if _which else None
