"""What an environment promises the run, and the errors when one of its parts breaks a promise:
``tasks(split)`` returns a list of ``Task`` records (``checked_tasks``), the grader returns a
score for every finished episode (``GraderError``), a tool returns what its annotation declares
(``ToolReturnTypeError``). Each error names the environment, the method, the task and the
user's own line (``components.blame``), so the fix is where the message points."""

from __future__ import annotations

from typing import Any

from coevolve_sdk.components.blame import ComponentError, blame, component_kind, user_frames
from coevolve_sdk.records import Task

__all__ = ["GraderError", "ToolReturnTypeError", "is_task_list", "not_tasks_error", "checked_tasks"]


class GraderError(ComponentError):
    """The grader of an environment (``score()``, or one check of its rubric) raised.

    Not the agent's doing: a grade that cannot be computed would train on a made-up reward,
    so ``AgentEnv.step`` raises this instead of returning a reward, and ``coevolve run`` stops
    with it (exit 2). ``check`` is the rubric check's name ("" when ``score()`` itself raised)."""

    def __init__(self, kind: str, name: str, cls: str, method: str, task_id: str | None, error: str, frames: list[str],
                 check: str = "") -> None:
        self.check = check
        super().__init__(kind, name, cls, method, task_id, error, frames)

    @property
    def headline(self) -> str:
        on = f" on task '{self.task_id}'" if self.task_id else ""
        what = f"rubric check '{self.check}'" if self.check else "score()"
        return f"the grader of {self.kind} '{self.name}' ({self.cls}) failed{on}: {what} raised {self.error}"

    fix = ("a grader must return a score in [0, 1] for every finished episode, including ones the agent got wrong "
           "(no final answer, an unexpected state): fix the line above")

    @classmethod
    def from_exception(cls, error: BaseException, env: Any) -> GraderError:
        klass = type(env)
        task = getattr(env, "task", None)
        msg = str(error)
        text = f"{type(error).__name__}: {msg}" if msg else type(error).__name__
        return cls(component_kind(env), getattr(env, "name", "") or klass.__name__, f"{klass.__module__}.{klass.__qualname__}",
                   "score", getattr(task, "id", None), text, user_frames(error, klass), getattr(error, "_coevolve_check", ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.name, self.cls, self.method, self.task_id, self.error, self.frames, self.check))


class ToolReturnTypeError(ComponentError):
    """A ToolEnv tool returned a value of another type than its return annotation declares.

    The declared type is the tool's documentation (and what a reader of the code trusts); a
    tool that returns something else is a bug in the environment, reported with the tool, the
    declared and the actual type wherever the tool runs (``coevolve check env``, a run)."""

    fix = "make the tool return what its annotation says, or change the annotation (the line above)"

    @property
    def headline(self) -> str:
        on = f" (task '{self.task_id}')" if self.task_id else ""
        return f"{self.kind} '{self.name}' ({self.cls}): {self.error}{on}"


def is_task_list(got: Any) -> bool:
    """What ``tasks(split)`` must return: a list whose items are all ``Task`` records."""
    return isinstance(got, list) and all(isinstance(t, Task) for t in got)


def not_tasks_error(env: Any, split: str, got: Any) -> ComponentError:
    """The error for ``env.tasks(split)`` having returned ``got``, which is not a list of Tasks."""
    if isinstance(got, list):
        i, bad = next(((i, t) for i, t in enumerate(got) if not isinstance(t, Task)), (0, None))
        what = f"item {i} of the list it returned is a {type(bad).__name__}, not a coevolve_sdk.Task"
    else:
        what = f"it returned a {type(got).__name__}, not a list of coevolve_sdk.Task"
    klass = env if isinstance(env, type) else type(env)
    return ComponentError("environment", getattr(klass, "name", "") or klass.__name__, f"{klass.__module__}.{klass.__qualname__}",
                          f"tasks('{split}')", None, f"{what}; build Task(...) records (Task.model_validate(d) turns a dict into one)", [])


def checked_tasks(env: Any, split: str = "train") -> list[Any]:
    """``env.tasks(split)``, with the contract checked: a list of ``Task`` records, and any
    exception from the environment named (AgentEnv subclasses check their own ``tasks``; this
    also covers any other object that offers one)."""
    with blame(env, "tasks", kind="environment"):
        got = env.tasks(split)
    if not is_task_list(got):
        raise not_tasks_error(env, split, got)
    return got
