"""Errors that name the culprit: which component, which method, which task, which lines.

A bug in a plugin used to end a run with a 60-120 line traceback through the loop, the
rollout and pydantic, and no line saying which environment (or teacher, or detector) failed,
in which of its methods, on which task. The core wraps every call into plugin code that can
fail on the plugin's side with :func:`blame`; an exception escaping it is re-raised as a
:class:`ComponentError` whose message is one headline::

    environment 'kvstore' (coevolve_kvstore.env.KVStoreEnv) failed in begin() on task 'kv-0-3': KeyError: 'initial'

followed by the frames of the plugin's own files only (the SDK's and third-party frames are
left out). The original exception stays attached as ``__cause__``, so ``--debug`` (or any
traceback printer) still shows everything. ``ComponentError`` is a ``CoEvolveError``: the CLI
prints it without a traceback and exits with status 2.

The SDK's own user errors (``CoEvolveError``) pass through unchanged: they already say what
to do. ``KeyboardInterrupt`` and ``SystemExit`` are never wrapped.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from pathlib import Path
from typing import Any, Iterator

from coevolve_sdk.errors import CoEvolveError

__all__ = ["ComponentError", "blame", "component_kind",
           "user_frames"]

#: base class name -> component kind, checked along the MRO (no imports: no cycles)
_KIND_BY_BASE = {
    "AgentEnv": "environment",
    "Teacher": "teacher",
    "Policy": "policy",
    "Algorithm": "algorithm",
    "SignalDetector": "detector",
    "TaskSampler": "sampler",
}
_MAX_FRAMES = 6


def component_kind(obj: Any) -> str:
    """The kind of a component instance or class ("environment", "teacher", ...), from its bases."""
    cls = obj if isinstance(obj, type) else type(obj)
    for klass in cls.__mro__:
        if klass.__name__ in _KIND_BY_BASE and klass.__module__.startswith("coevolve_sdk"):
            return _KIND_BY_BASE[klass.__name__]
    return "component"


def _plugin_root(cls: type) -> Path | None:
    """The folder (or file) of the package that defines ``cls``: frames inside it are the plugin's."""
    top = sys.modules.get(cls.__module__.split(".")[0])
    mod = sys.modules.get(cls.__module__)
    for m in (top, mod):
        f = getattr(m, "__file__", None)
        if f:
            p = Path(f).resolve()
            return p.parent if p.name == "__init__.py" else p
    return None


def plugin_frames(error: BaseException, cls: type) -> list[str]:
    """The traceback lines of ``error`` that lie in ``cls``'s own package, innermost last; the
    innermost frame of all when none does (the error came from a library it called)."""
    tb = traceback.extract_tb(error.__traceback__)
    root = _plugin_root(cls)
    mine = []
    for fr in tb:
        try:
            path = Path(fr.filename).resolve()
        except OSError:
            continue
        if root is not None and (path == root or root in path.parents):
            mine.append(fr)
    chosen = mine[-_MAX_FRAMES:] if mine else tb[-1:]
    return [line.rstrip("\n") for line in traceback.format_list(chosen)]


def user_frames(error: BaseException, cls: type | None = None) -> list[str]:
    """The traceback lines of ``error`` in the user's code: the frames of ``cls``'s package when
    there are any, otherwise every frame outside the SDK and installed libraries (a grader
    function may live in another file than the environment class), innermost last."""
    if cls is not None:
        tb = traceback.extract_tb(error.__traceback__)
        root = _plugin_root(cls)
        if root is not None and any(root == Path(fr.filename).resolve() or root in Path(fr.filename).resolve().parents for fr in tb):
            return plugin_frames(error, cls)
    import sysconfig

    skip = [Path(__file__).resolve().parents[1], Path(sysconfig.get_paths()["stdlib"]).resolve()]
    chosen = []
    for fr in traceback.extract_tb(error.__traceback__):
        if fr.filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
            continue
        path = Path(fr.filename).resolve()
        if any(d in path.parents for d in skip) or "site-packages" in path.parts:
            continue
        chosen.append(fr)
    chosen = chosen[-_MAX_FRAMES:] or traceback.extract_tb(error.__traceback__)[-1:]
    return [line.rstrip("\n") for line in traceback.format_list(chosen)]


class ComponentError(CoEvolveError):
    """Plugin code raised. ``kind``, ``name``, ``cls`` (dotted path), ``method``, ``task_id``
    say where; ``error`` is the type and message of the original exception (``__cause__``)."""

    def __init__(self, kind: str, name: str, cls: str, method: str, task_id: str | None, error: str, frames: list[str]) -> None:
        self.kind, self.name, self.cls, self.method, self.task_id = kind, name, cls, method, task_id
        self.error, self.frames = error, list(frames)
        super().__init__(self.render())

    @property
    def headline(self) -> str:
        on = f" on task '{self.task_id}'" if self.task_id else ""
        call = self.method if "(" in self.method else self.method + "()"
        return f"{self.kind} '{self.name}' ({self.cls}) failed in {call}{on}: {self.error}"

    def render(self) -> str:
        lines = [self.headline]
        if self.frames:
            lines.append("  in the plugin's code:")
            lines.extend(f"  {f}" for f in self.frames)
        lines.append("  (the full traceback: run again with --debug)")
        return "\n".join(lines)

    @classmethod
    def wrap(cls, error: BaseException, component: Any, method: str, task: Any = None, kind: str | None = None) -> ComponentError:
        klass = component if isinstance(component, type) else type(component)
        name = getattr(component, "name", "") or klass.__name__
        task_id = getattr(task, "id", task if isinstance(task, str) else None)
        msg = str(error)
        text = f"{type(error).__name__}: {msg}" if msg else type(error).__name__
        return cls(kind or component_kind(component), name, f"{klass.__module__}.{klass.__qualname__}", method, task_id, text,
                   plugin_frames(error, klass))

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (experiment workers)
        return (type(self), (self.kind, self.name, self.cls, self.method, self.task_id, self.error, self.frames))


@contextlib.contextmanager
def blame(component: Any, method: str, task: Any = None, kind: str | None = None) -> Iterator[None]:
    """Re-raise an exception from the block as a :class:`ComponentError` naming ``component``,
    ``method`` and ``task`` (a Task or a task id). Use it around one call into plugin code::

        with blame(env, "begin", task):
            messages = env.begin(task)
    """
    try:
        yield
    except CoEvolveError:
        raise
    except Exception as e:
        raise ComponentError.wrap(e, component, method, task, kind) from e
