"""AgentEnv: a gymnasium environment for multi-turn, text-in/text-out tool use.

The gymnasium surface (``reset``/``step`` over strings) is what any RL library can drive. On top
of it CoEvolve needs a few things gymnasium has no words for: the task pool (``tasks``), the
tools the agent sees (``tools``), a grade for a finished episode (``score``), the action
pattern used by the rare-signal detector, random valid actions for exploration
(``sample_action``), replay of a known action sequence for validation (``replay``) and the
instantiation of a synthetic task on a base state (``make_task``).

An implementer writes ``tasks``, ``tools``, ``begin``, ``act``, ``score`` and
``sample_action``; the base class turns them into the gymnasium API and guarantees:

* ``step`` never raises for bad agent output: ``act`` reports it as an error message and the
  episode goes on (``AgentEnv.step`` also catches what ``act`` lets escape, as a last line).
  It does raise for a bug that would make the reward wrong: a grader (``score()`` or a rubric
  check) that raises gives :class:`~coevolve_sdk.components.blame.GraderError` naming the check, the
  task and the user's line, and a ToolEnv tool returning another type than it declares gives
  :class:`~coevolve_sdk.components.blame.ToolReturnTypeError`. Both are ``CoEvolveError``s: ``coevolve
  run`` stops with the message and exit status 2, ``coevolve check env`` reports them;
* the episode ends after ``options.max_steps`` agent actions (``truncated=True``);
* the reward is 0 until the episode ends, then the environment's ``score()`` in [0, 1];
* ``tasks()`` returns ``Task`` records: a subclass's ``tasks`` is wrapped so that returning
  anything else (dicts, say) fails at once with a message naming the environment, instead of
  as an AttributeError wherever the tasks are first read.

Life cycle of an instance: ``Env(options, context)`` (cheap: expensive set-up waits for the
first use) → ``tasks(split)`` → for each episode ``reset(seed=..., options={"task": task})``
(which calls ``begin(task)``) then ``step(action)`` until ``terminated`` or ``truncated`` (each
calls ``act``; the last one also ``score``) → ``close()``. Between episodes the same instance
is reused; the teacher and the validator get instances of their own and call ``sample_action``,
``describe``, ``make_task`` and ``replay``. Tools built on typed methods, with all of the above
derived, are :class:`coevolve_sdk.env.toolenv.ToolEnv`; ``coevolve check env NAME`` (or
:func:`coevolve_sdk.authoring.check.check_env`) checks every contract of this module.
"""

from __future__ import annotations

import inspect
import traceback
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
from pydantic import BaseModel, Field

from coevolve_sdk.components.base import Component, ComponentOptions
from coevolve_sdk.errors import CoEvolveError
from coevolve_sdk.env.spaces import AnyText
from coevolve_sdk.records import CandidateTask, Step, Task, ToolSpec, Trajectory

if TYPE_CHECKING:
    from coevolve_sdk.components.context import RunContext

__all__ = ["AgentEnv", "EnvOptions", "Outcome", "ReplayResult"]


class EnvOptions(ComponentOptions):
    """Options every environment accepts; subclass it to add your own."""

    max_steps: int = Field(30, ge=1, description="Agent actions per episode before truncation (paper: 30).")


class Outcome(BaseModel):
    """What ``act`` returns: the messages the agent sees next, and whether the episode is over."""

    messages: list[dict[str, Any]]
    done: bool = False
    tool_names: list[str] = Field(default_factory=list)
    error: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class ReplayResult(BaseModel):
    score: float
    success: bool
    steps: list[Step]
    errors: list[str] = Field(default_factory=list)


def _checked_tasks(fn: Any) -> Any:
    """Wrap an environment's ``tasks`` so that what it returns is checked to be Task records."""
    import functools

    @functools.wraps(fn)
    def tasks(self: AgentEnv, split: str = "train") -> list[Task]:
        got = fn(self, split)
        from coevolve_sdk.env.contract import is_task_list, not_tasks_error

        if is_task_list(got):
            return got
        raise not_tasks_error(self, split, got)

    tasks._coevolve_checked = True  # type: ignore[attr-defined]
    return tasks


class AgentEnv(Component, gym.Env[str, str], ABC):
    """Base class of every CoEvolve environment.

    Class attributes: ``name`` (the registered name, used in configs), ``version`` (the
    gymnasium id is ``coevolve/<name>-v<version>``) and ``Options`` (a pydantic model of the
    keyword options the environment takes).

    Built like every component, ``Env(options, context)``; gymnasium's
    ``gymnasium.make("coevolve/<name>-v0", max_steps=5, render_mode="ansi")`` passes the
    options as keywords instead, and both may be combined (keywords win).

    Options: declare your own as a nested ``class Options(EnvOptions)`` with pydantic fields
    (a ``description`` each: they are the documentation ``coevolve config schema`` prints);
    a run config's ``environment.options`` is validated against it (unknown keys are errors)
    and the instance reads them as ``self.options.<field>``.

    Instance attributes during an episode: ``task`` (the Task being played), ``messages``
    (the whole conversation: opening messages, then each action and its answers), ``steps``
    (one ``Step`` per finished ``step`` call), ``done``, ``np_random`` (seeded by
    ``reset(seed=...)``: draw every random choice from it so that episodes replay), ``options``
    and ``context`` (the run, or None outside one).

    Resetting to a given task goes through gymnasium's ``options``:
    ``env.reset(seed=0, options={"task": task})`` (a ``Task`` or its dict); without a task,
    ``reset`` draws one of ``tasks("train")`` with ``np_random``.
    """

    name: ClassVar[str] = ""
    version: ClassVar[int] = 0
    Options: ClassVar[type[EnvOptions]] = EnvOptions
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    success_threshold: ClassVar[float] = 0.5
    """The one definition of success: an episode whose ``score()`` is at least this value counts
    as solved. It decides ``Trajectory.success`` in rollouts and evaluation and ``ReplayResult.success``
    in validation; signal detectors read it from the environment class. Raise it for graded
    scores (a rubric that gives 0.6 for a half-right answer), keep 0.5 for all-or-nothing ones."""
    action_format: ClassVar[str | None] = None
    """How an action looks, in words an LLM teacher can follow when it explores this environment
    (it is put into the teacher's explore and abstract prompts). None means the SDK's default,
    one or more ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks per message
    (the format ``coevolve_sdk.env.actions`` parses); set it when your environment reads another
    syntax (BFCL also accepts python-call syntax)."""
    concurrent_steps: ClassVar[bool] = False
    """Whether separate instances may run ``reset``/``step``/``score`` at the same time, each in
    its own thread. Set it to True when an instance keeps all its state to itself and mostly
    waits (on a socket, a subprocess, a remote service: AppWorld's workers): the rollout then
    steps the live episodes in a thread pool (``rollout.env_workers``) and their waits overlap.
    Leave it False for environments that share module-level state, hold a process-wide
    resource, or are pure Python computation (the GIL would serialise them anyway); the rollout
    steps those one after another whatever ``env_workers`` says. One instance is never used by
    two threads at once either way."""

    def __init__(
        self,
        options: EnvOptions | Mapping[str, Any] | None = None,
        context: RunContext | None = None,
        *,
        render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(context, str):
            # the signature before environments took a context was (options, render_mode)
            warnings.warn(
                f"{type(self).__name__}: AgentEnv's second argument is the run context now; "
                "pass render_mode by keyword (super().__init__(options, context, render_mode=render_mode))",
                DeprecationWarning,
                stacklevel=2,
            )
            context, render_mode = None, context
        if kwargs:  # gymnasium.make passes options as keywords
            base = options.model_dump() if isinstance(options, BaseModel) else dict(options or {})
            options = {**base, **kwargs}
        super().__init__(options, context)
        self.options: EnvOptions
        self.render_mode = render_mode
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.task: Task | None = None
        self.messages: list[dict[str, Any]] = []
        self.steps: list[Step] = []
        self.done = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own_tasks = cls.__dict__.get("tasks")
        if inspect.isfunction(own_tasks) and not getattr(own_tasks, "_coevolve_checked", False):
            cls.tasks = _checked_tasks(own_tasks)  # type: ignore[method-assign]
        # Register with gymnasium as soon as the class exists. This also covers the import
        # order where a plugin's own module is imported before coevolve_sdk has finished
        # loading plugins (the registry then cannot see the half-imported class yet).
        if cls.name and not inspect.isabstract(cls):
            try:
                import gymnasium

                if cls.gym_id() not in gymnasium.registry:
                    gymnasium.register(id=cls.gym_id(), entry_point=cls)
            except Exception:  # registration is a convenience; never break a class definition
                pass

    # ------------------------------------------------------------------ implementer's part
    @abstractmethod
    def tasks(self, split: str = "train") -> list[Task]:
        """The environment's own tasks for a split (seed or benchmark tasks), as ``Task`` records.

        ``train`` feeds the seed pool and ``reset`` without a task; the evaluation split
        (``eval.split``, usually ``test``) must not share tasks with it: no id, and no request
        on the same payload (``coevolve check env`` checks both). Raise ValueError for a split
        the environment does not have (rather than returning the train tasks again)."""

    @abstractmethod
    def tools(self) -> list[ToolSpec]:
        """The tools the agent can call right now (may change within an episode)."""

    @abstractmethod
    def begin(self, task: Task) -> list[dict[str, Any]]:
        """Set up a fresh state for ``task`` and return the opening messages, a list of
        ``{"role": ..., "content": ...}`` dicts (usually system, then user with ``task.query``).

        Read what the state needs from ``task.payload``; a synthetic task's payload is what
        ``make_task`` built, so both must agree on its keys."""

    @abstractmethod
    def act(self, action: str) -> Outcome:
        """Carry out one agent message. Report bad output through ``Outcome.error``."""

    @abstractmethod
    def score(self) -> float:
        """The grade in [0, 1] of the episode so far (called when it ends)."""

    @abstractmethod
    def sample_action(self) -> str:
        """A valid action drawn with ``self.np_random`` from the live state (random exploration)."""

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        """Turn an executed action sequence into a plain-language request (offline templater).

        The random explorer uses it to abstract tasks without an LLM. The default lists the
        calls; environments should override it with something a user would actually say, and
        return "" for calls that make no request of their world (the explorer then proposes
        no task from them).
        """
        return "Perform these operations in order: " + "; ".join(s.action for s in steps)

    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        """Instantiate a proposed task on the state of ``base`` (its parent task).

        The default keeps the base task's payload (its initial state) and replaces the query
        and reference actions; environments whose grading needs more (BFCL's ground truth per
        turn, say) override it.
        """
        payload = dict(base.payload) if base is not None else {}
        payload.update(candidate.payload)
        return Task(
            env=self.name,
            query=candidate.query,
            origin="synthetic",
            payload=payload,
            reference_actions=list(candidate.reference_actions),
        )

    def action_pattern(self, trajectory: Trajectory) -> str:
        """The key the rare-signal detector counts: by default the ordered tool names called."""
        names: list[str] = []
        for s in trajectory.steps:
            names.extend(s.info.get("tool_names", []))
        return ">".join(names)

    # ------------------------------------------------------------------ provided
    def replay(self, task: Task, actions: list[str]) -> ReplayResult:
        """Execute ``actions`` on a fresh instance of ``task`` and grade the result."""
        self.reset(options={"task": task})
        errors: list[str] = []
        for a in actions:
            if self.done:
                break
            _, _, _, _, info = self.step(a)
            if info.get("error"):
                errors.append(str(info["error"]))
        sc = self._checked_score()
        return ReplayResult(score=sc, success=sc >= self.success_threshold, steps=list(self.steps), errors=errors)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            pool = self.tasks("train")
            if not pool:
                raise RuntimeError(f"environment '{self.name}' has no train tasks; pass options={{'task': task}}")
            task = pool[int(self.np_random.integers(0, len(pool)))]
        elif isinstance(task, dict):
            task = Task.model_validate(task)
        elif not isinstance(task, Task):
            raise TypeError(f"options['task'] must be a Task or a dict, got {type(task).__name__}")
        self.task = task
        self.steps = []
        self.done = False
        self.messages = list(self.begin(task))
        obs = "\n\n".join(str(m.get("content", "")) for m in self.messages)
        info = {
            "task_id": task.id,
            "tools": [t.as_openai() for t in self.tools()],
            "messages": list(self.messages),
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            msg = {"role": "user", "content": "The episode is over."}
            return msg["content"], 0.0, True, False, {"messages": [msg], "error": "episode over", "tool_names": []}
        if not isinstance(action, str):
            action = str(action)
        try:
            out = self.act(action)
        except CoEvolveError:  # the environment's own bugs that must stop a run (ToolReturnTypeError)
            raise
        except Exception as e:  # the contract says act() reports errors; this keeps a buggy env alive
            out = Outcome(
                messages=[{"role": "user", "content": f"Error: the environment failed on this action ({type(e).__name__}: {e})."}],
                error=f"{type(e).__name__}: {e}",
                info={"traceback": traceback.format_exc(limit=3)},
            )
        obs = "\n\n".join(str(m.get("content", "")) for m in out.messages)
        self.messages.append({"role": "assistant", "content": action})
        self.messages.extend(out.messages)
        info: dict[str, Any] = {"messages": out.messages, "tool_names": out.tool_names, **out.info}
        if out.error:
            info["error"] = out.error
        terminated = out.done
        truncated = (not terminated) and len(self.steps) + 1 >= self.options.max_steps
        reward = 0.0
        if terminated or truncated:
            self.done = True
            reward = self._checked_score()
        self.steps.append(Step(action=action, observation=obs, reward=reward, info={k: v for k, v in info.items() if k != "messages"}))
        return obs, reward, terminated, truncated, info

    def _checked_score(self) -> float:
        """``score()`` as a float, with a grader that raises reported as the grader's bug.

        ``step``, ``replay`` and the rollout grade through this method (private: environments
        have methods of their own named ``grade``, BFCL's for one). An exception from
        ``score()`` (or from one check of a rubric) becomes a :class:`GraderError` naming the
        environment, the rubric check, the task and the lines of the user's code; the original
        exception is its ``__cause__``."""
        try:
            return float(self.score())
        except CoEvolveError:
            raise
        except Exception as e:
            from coevolve_sdk.env.contract import GraderError

            raise GraderError.from_exception(e, self) from e

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in self.messages)
        return None

    @classmethod
    def gym_id(cls) -> str:
        return f"coevolve/{cls.name}-v{cls.version}"
