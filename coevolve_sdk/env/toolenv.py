"""ToolEnv: an environment whose tools are typed Python methods.

Every tool-use environment needs the same machinery around its tools: parse the agent's
``<tool_call>`` blocks, check each call's arguments, dispatch, turn every mistake into an
error message the agent can read, publish JSON schemas, draw random valid calls for the
explorer, and phrase executed calls as a request. ToolEnv derives all of it from the tool
methods themselves, so an environment is its state, its tools, its tasks and its grade::

    from typing import Annotated
    from pydantic import Field
    from coevolve_sdk import ToolEnv, ToolError, from_state, tool

    class Counter(ToolEnv):
        name = "counter"

        def setup(self, task):                       # the state of a fresh episode
            self.counts = dict(task.payload.get("initial", {}))

        def snapshot(self):                          # what grading compares (JSON values)
            return self.counts

        @tool(phrase="add {n} to {name}")
        def add(self, name: Annotated[str, from_state(lambda env: sorted(env.counts))],
                n: Annotated[int, Field(ge=1, le=5)]) -> int:
            '''Add to an existing counter.

            Args:
                name: The counter to change.
                n: How much to add.
            '''
            if name not in self.counts:
                raise ToolError(f"no counter '{name}'")
            self.counts[name] += n
            return self.counts[name]

        def tasks(self, split="train"):
            return [self.build_task("Add 2 to a.", [call("add", name="a", n=2)], initial={"a": 1})]

What the base class provides, from the methods marked with :func:`tool`:

* ``tools()``: one ``ToolSpec`` per tool; its JSON schema comes from the signature (pydantic),
  the description from the docstring's first paragraph, one description per argument from its
  ``Args:`` section.
* ``act()``: every ``<tool_call>`` of a message is run in order (several per message); the
  arguments are validated strictly (``"3"`` is not an int, unknown arguments are refused)
  against a pydantic model built per tool; the tool's return value is the observation
  (``str`` as is, ``None`` as ``"ok"``, a pydantic model or any JSON value as JSON). When the
  tool declares a return type, every result is checked against it strictly: a mismatch is a
  bug of the environment and raises :class:`~coevolve_sdk.components.blame.ToolReturnTypeError`
  (tool, declared and actual type) out of ``step``, at ``coevolve check env`` and in a run. An unknown tool, bad
  arguments, a :class:`ToolError` (or another type listed in ``user_errors``) become an
  ``Error: ...`` observation; any other exception is a bug in the tool, reported the same way
  (with ``info["tool_bugs"]``) and never escapes ``step``. A message without a tool call is
  the final answer: it ends the episode and is kept in ``self.answer``.
* ``sample_action()``: a random tool whose arguments can be drawn now, each argument from its
  sampler (:func:`from_state`) or its type's domain (``Literal``, ``bool``, an ``Enum``, an int
  or float bounded with ``Field(ge=, le=)``); arguments with a default are left out.
* ``describe()``: the executed calls phrased with each tool's ``phrase`` template, joined with
  ", then ". ``action_pattern()`` is AgentEnv's: the ordered names of the tools called.
* Grading: ``score()`` is ``self.rubric.score(self)``; the default rubric requires the final
  state to equal the task's expected state and the final message to contain the expected
  answer (:mod:`coevolve_sdk.env.rubric`); a task expects an answer only when its last reference
  call is of a tool declared ``answers=True``, otherwise any final message passes.
* Prompt size: the ``tool_docs`` option (every ToolEnv has it, see :class:`ToolEnvOptions`)
  sends the tools' whole schemas, a compact form or none.
* Tasks by execution: :meth:`build_task` runs reference actions on an initial state and
  records the expected final state and answer in the payload; the default :meth:`make_task`
  does the same for a teacher's candidate on its parent's initial state. So a synthetic task is
  graded by state comparison with no code of its own, and a candidate whose actions fail is
  refused at validation.

Task payload convention: ``payload["initial"]`` is what ``setup`` builds the state from,
``payload["expected"]`` the expected ``snapshot()`` after the reference actions, and
``payload["answer"]`` the expected answer (the result of the last call, when that tool is
declared ``answers=True``; None otherwise).
"""

from __future__ import annotations

import inspect
import json
import traceback
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, create_model

from coevolve_sdk.env.actions import ActionParseError, ToolCall, calls_in, format_tool_call, parse_tool_calls
from coevolve_sdk.env.base import AgentEnv, EnvOptions, Outcome
from coevolve_sdk.env.rubric import Check, Rubric, answer_matches, as_json, state_matches
from coevolve_sdk.records import CandidateTask, Step, Task, ToolSpec
from coevolve_sdk.env.tools import (  # noqa: F401 - the tool machinery (env/tools.py), also importable from here
    ArgInfo,
    CallResult,
    StateSampler,
    ToolError,
    ToolInfo,
    _MARK,
    _build_tool,
    _domain,
    _format_validation,
    _type_name,
    _value_type,
    call,
    from_state,
    parse_docstring,
    tool,
)

__all__ = ["ToolEnv", "ToolEnvOptions", "ToolError", "ToolInfo", "ArgInfo", "CallResult", "StateSampler", "tool", "from_state", "call"]


class ToolEnvOptions(EnvOptions):
    """Options every ToolEnv has (its own ``Options`` gains them when it does not derive from
    this class)."""

    tool_docs: Literal["full", "compact", "none"] = Field(
        "full", description="How the tools are described in the agent's prompt. full: each tool's whole JSON schema "
                            "(descriptions of the tool and of every argument); compact: the tool's description and only "
                            "the arguments' names and types (a fraction of the tokens, for a small model); none: no tool "
                            "list at all (a model trained from scratch learns the tools from its tasks and cannot read "
                            "docs). Validation and exploration are the same in all three.")


def _with_tool_docs(options: type[BaseModel]) -> type[BaseModel]:
    """``options`` with ToolEnvOptions' fields added, under the same name (a subclass of both)."""
    if "tool_docs" in options.model_fields:
        return options
    derived = create_model(options.__name__, __base__=(options, ToolEnvOptions), __module__=options.__module__)
    derived.__qualname__ = options.__qualname__
    derived.__doc__ = options.__doc__
    return derived


class ToolEnv(AgentEnv):
    """An AgentEnv built from ``@tool`` methods; see the module docstring for the whole API.

    You write: ``setup(task)`` (the fresh state of an episode), the tools, ``tasks(split)``
    (usually with :meth:`build_task`) and, for state-comparison grading, ``snapshot()``. You
    may set: ``system_prompt``, ``rubric`` (the grade), ``user_errors`` (exception types that
    mean "the agent made a mistake"), ``answer_template`` / ``done_message`` (the closing
    message ``build_task`` appends to reference actions).

    Attributes during an episode: ``task``, ``messages``, ``steps``, ``done`` (AgentEnv's) and
    ``answer`` (the agent's final message, None until it gives one).
    """

    system_prompt: ClassVar[str] = (
        "Use the tools to do what the user asks. When you are done, reply with a short message and no tool call."
    )
    rubric: ClassVar[Rubric] = Rubric([Check(state_matches, required=True), Check(answer_matches, required=True)])
    user_errors: ClassVar[tuple[type[BaseException], ...]] = (ToolError,)
    answer_template: ClassVar[str] = "The answer is {answer}."
    done_message: ClassVar[str | None] = "Done."
    Options: ClassVar[type[EnvOptions]] = ToolEnvOptions
    _tool_table: ClassVar[dict[str, ToolInfo]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if isinstance(cls.__dict__.get("Options"), type):  # a subclass's own Options gains tool_docs
            cls.Options = _with_tool_docs(cls.__dict__["Options"])  # type: ignore[assignment]
        table: dict[str, ToolInfo] = {}
        by_method: dict[str, str] = {}
        reserved = {n for base in (AgentEnv, ToolEnv) for n in dir(base)}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                meta = getattr(value, _MARK, None) if inspect.isfunction(value) else None
                if attr in by_method:  # redefined in a subclass: the new definition wins
                    table.pop(by_method.pop(attr), None)
                if meta is None:
                    continue
                if attr in reserved:
                    raise TypeError(f"tool {cls.__name__}.{attr}: the method name '{attr}' is part of the environment API; "
                                    f"name the method differently and keep the tool's name with @tool(name='{attr}')")
                if meta["name"] in table:
                    raise TypeError(f"{cls.__name__}: two tools are named '{meta['name']}' ({table[meta['name']].method} and {attr})")
                table[meta["name"]] = _build_tool(cls, attr, value, meta)
                by_method[attr] = meta["name"]
        cls._tool_table = table
        super().__init_subclass__(**kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # AgentEnv's: (options, context, render_mode=..., **options)
        self.answer: str | None = None
        self._scratch: ToolEnv | None = None

    # ------------------------------------------------------------------ implementer's part
    def setup(self, task: Task) -> None:
        """Build the state of a fresh episode of ``task`` (by convention from ``task.payload["initial"]``)."""
        raise NotImplementedError(f"{type(self).__name__} must define setup(task): build the episode's state from the task")

    def snapshot(self) -> Any:
        """The state that grading compares, as JSON values (dicts, lists, numbers, strings).

        Needed by the default rubric and by ``build_task``/``make_task``, which store the
        expected snapshot in the task payload."""
        raise NotImplementedError(
            f"{type(self).__name__} must define snapshot() to grade by state comparison (the default rubric, "
            "build_task and make_task use it), or override score() and make_task()"
        )

    def opening(self, task: Task) -> list[dict[str, Any]]:
        """The first messages of an episode: the system prompt and the task's query."""
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": task.query}]

    # ------------------------------------------------------------------ tools
    @classmethod
    def tool_infos(cls) -> list[ToolInfo]:
        """The tools of this class, in definition order."""
        return list(cls._tool_table.values())

    def tools(self) -> list[ToolSpec]:
        """The tools as the agent's prompt describes them, per the ``tool_docs`` option."""
        docs = getattr(self.options, "tool_docs", "full")
        if docs == "none":
            return []
        if docs == "compact":
            return [ToolSpec(name=t.name, description=t.spec.description,
                             parameters={"properties": {k: {"type": v.get("type", "string")}
                                                        for k, v in t.spec.parameters.get("properties", {}).items()}})
                    for t in self._tool_table.values()]
        return [t.spec for t in self._tool_table.values()]

    def run_call(self, c: ToolCall) -> CallResult:
        """Validate and run one call on the live state; never raises for the agent's mistakes."""
        info = self._tool_table.get(c.name)
        if info is None:
            return CallResult(c.name, "", error=f"unknown tool '{c.name}'; the tools are: {', '.join(self._tool_table) or 'none'}")
        try:
            parsed = info.model.model_validate(c.arguments)
        except ValidationError as e:
            return CallResult(c.name, "", error=_format_validation(c.name, e, [a.name for a in info.args]), tool=info)
        kwargs = dict(parsed)  # not getattr: an argument may be named like a BaseModel method
        try:
            result = getattr(self, info.method)(**kwargs)
        except self.user_errors as e:
            return CallResult(c.name, "", error=str(e) or type(e).__name__, tool=info)
        except Exception as e:
            bug = f"tool '{c.name}' raised {type(e).__name__}: {e}"
            return CallResult(c.name, "", error=f"the tool '{c.name}' failed ({type(e).__name__}: {e})", bug=bug + "\n" + traceback.format_exc(limit=4), tool=info)
        if info.return_check is not None and not info.return_check(result):
            raise self._return_type_error(info, result)
        return CallResult(c.name, self.render_result(result), tool=info)

    def _return_type_error(self, info: ToolInfo, result: Any) -> Exception:
        from coevolve_sdk.env.contract import ToolReturnTypeError

        fn = getattr(type(self), info.method)
        code = getattr(fn, "__code__", None)
        where = [f'  File "{code.co_filename}", line {code.co_firstlineno}, in {info.method}'] if code else []
        cls = type(self)
        shown = repr(result)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return ToolReturnTypeError(
            "environment", self.name or cls.__name__, f"{cls.__module__}.{cls.__qualname__}", f"tool '{info.name}'",
            getattr(self.task, "id", None),
            f"tool '{info.name}' is declared to return {_type_name(info.returns)} but returned {_value_type(result)} ({shown})", where)

    def render_result(self, result: Any) -> str:
        """A tool's return value as the text the agent reads."""
        if result is None:
            return "ok"
        if isinstance(result, str):
            return result
        if isinstance(result, BaseModel):
            return result.model_dump_json()
        return json.dumps(result, ensure_ascii=False, default=str)

    # ------------------------------------------------------------------ AgentEnv
    def begin(self, task: Task) -> list[dict[str, Any]]:
        self.answer = None
        self.setup(task)
        return self.opening(task)

    def act(self, action: str) -> Outcome:
        try:
            calls = parse_tool_calls(action)
        except ActionParseError as e:
            return Outcome(messages=[{"role": "tool", "content": f"Error: {e}"}], error=str(e))
        if not calls:
            self.answer = action
            return Outcome(messages=[], done=True)
        messages: list[dict[str, Any]] = []
        errors: list[str] = []
        bugs: list[str] = []
        done = False
        for c in calls:
            if done:
                messages.append({"role": "tool", "name": c.name, "content": "Error: the episode ended before this call"})
                continue
            r = self.run_call(c)
            if r.error is not None:
                errors.append(r.error)
                if r.bug:
                    bugs.append(r.bug)
                messages.append({"role": "tool", "name": c.name, "content": f"Error: {r.error}"})
            else:
                messages.append({"role": "tool", "name": c.name, "content": r.text})
                done = bool(r.tool and r.tool.ends_episode)
        info: dict[str, Any] = {"tool_bugs": bugs} if bugs else {}
        return Outcome(messages=messages, done=done, tool_names=[c.name for c in calls], error="; ".join(errors) or None, info=info)

    def score(self) -> float:
        return float(self.rubric.score(self))

    def sample_action(self) -> str:
        tools = [t for t in self._tool_table.values() if t.explore]
        rng = self.np_random
        unsampleable: list[str] = []
        for i in rng.permutation(len(tools)):
            t = tools[int(i)]
            args = self._sample_arguments(t, unsampleable)
            if args is not None:
                return format_tool_call(t.name, args)
        raise RuntimeError(
            f"{type(self).__name__}.sample_action: no tool can be sampled in this state ({'; '.join(unsampleable) or 'no tools'}). "
            "Give such arguments a sampler (Annotated[str, from_state(...)]) or a small domain (Literal, Field(ge=, le=))."
        )

    def _sample_arguments(self, t: ToolInfo, why: list[str]) -> dict[str, Any] | None:
        rng = self.np_random
        out: dict[str, Any] = {}
        for a in t.args:
            if a.sampler is not None:
                try:
                    values = a.sampler.candidates(self, out)
                except Exception as e:
                    raise RuntimeError(f"the sampler of argument '{a.name}' of tool '{t.name}' raised {type(e).__name__}: {e} "
                                       "(samplers read the live state: call reset() first)") from e
                if not values:
                    why.append(f"'{t.name}': nothing to draw '{a.name}' from now")
                    return None
                out[a.name] = values[int(rng.integers(0, len(values)))]
                continue
            if not a.required:
                continue
            dom = _domain(t.model, a)
            if dom is None:
                why.append(f"'{t.name}': argument '{a.name}' has no sampler and no small domain")
                return None
            if isinstance(dom, list):
                out[a.name] = dom[int(rng.integers(0, len(dom)))]
            else:
                lo, hi, is_int = dom
                out[a.name] = int(rng.integers(int(lo), int(hi) + 1)) if is_int else round(float(rng.uniform(lo, hi)), 2)
        return out

    def phrase(self, c: ToolCall) -> str:
        """How a request says one call: the tool's ``phrase`` template, or a plain description."""
        info = self._tool_table.get(c.name)
        if info is not None and info.phrase:
            values = {a.name: c.arguments.get(a.name, "") for a in info.args}
            try:
                return info.phrase.format(**values)
            except (KeyError, IndexError, ValueError):
                pass
        if not c.arguments:
            return f"call {c.name}"
        return f"call {c.name} with " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in c.arguments.items())

    def request(self, calls: list[ToolCall] | list[str]) -> str:
        """A request asking for ``calls`` (ToolCall records or action texts) in order: their
        phrases joined with ", then "."""
        calls = [c for x in calls for c in ([x] if isinstance(x, ToolCall) else parse_tool_calls(x))]
        if not calls:
            return "Do nothing."
        text = ", then ".join(self.phrase(c) for c in calls)
        return text[0].upper() + text[1:] + "."

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        return self.request(calls_in(*(s.action for s in steps)))

    # ------------------------------------------------------------------ tasks by execution
    def _scratch_env(self) -> ToolEnv:
        # A second instance, so that building a task never disturbs this one's live episode.
        if self._scratch is None:
            self._scratch = type(self)(self.options, getattr(self, "context", None))
        return self._scratch

    def _execute_reference(self, task: Task) -> tuple[Any, str | None]:
        """Run ``task``'s reference actions on a fresh state; returns (final snapshot, answer).
        Raises ValueError naming the first action that is malformed or fails."""
        env = self._scratch_env()
        env.task = task
        env.answer = None
        env.setup(task)
        answer: str | None = None
        actions = task.reference_actions
        for i, action in enumerate(actions, 1):
            try:
                calls = parse_tool_calls(action)
            except ActionParseError as e:
                raise ValueError(f"reference action {i} is malformed: {e}") from None
            ended = not calls  # a message without a tool call ends an episode, as in step()
            for c in calls:
                r = env.run_call(c)
                if r.error is not None:
                    raise ValueError(f"reference action {i} fails on the base state: {r.error}")
                answer = r.text if r.tool is not None and r.tool.answers else None
                ended = ended or bool(r.tool and r.tool.ends_episode)
            if ended and i < len(actions):
                raise ValueError(f"reference action {i} ends the episode but {len(actions) - i} more follow; "
                                 "a message without a tool call (or an ends_episode tool) must come last")
        return as_json(env.snapshot()), answer

    def build_task(self, query: str | None, actions: list[str], *, initial: Any = None, close: bool = True, **fields: Any) -> Task:
        """A task whose grade is known by execution: run ``actions`` on the state built from
        ``initial`` and store the expected final state and answer in the payload.

        ``query`` None phrases the request from the actions (:meth:`request`).

        With ``close`` the reference actions end with a final message: ``answer_template`` when
        the last call answers (a tool declared ``answers=True``), ``done_message`` otherwise.
        ``fields`` go to ``Task`` (``id``, ``split``, ``origin``, extra ``payload`` keys...).
        Raises ValueError when an action is malformed or fails."""
        payload = {**dict(fields.pop("payload", {}) or {}), "initial": initial}
        if query is None:
            query = self.request(actions)
        task = Task(env=self.name, query=query, payload=payload, reference_actions=list(actions), **fields)
        expected, answer = self._execute_reference(task)
        refs = list(actions)
        if close and (not refs or parse_tool_calls(refs[-1])):
            closing = self.answer_template.format(answer=answer) if answer is not None else self.done_message
            if closing:
                refs.append(closing)
        return task.model_copy(update={"payload": {**payload, "expected": expected, "answer": answer}, "reference_actions": refs})

    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        """A candidate's task on its parent's initial state, with its expected state and answer
        computed by running its reference actions (which must all succeed). A candidate's own
        ``payload["initial"]`` is merged into (a dict) or replaces the parent's."""
        payload = dict(base.payload) if base is not None else {}
        initial = payload.get("initial")
        extra = dict(candidate.payload)
        if "initial" in extra:
            mine = extra.pop("initial")
            initial = {**initial, **mine} if isinstance(initial, dict) and isinstance(mine, dict) else mine
        payload.update({k: v for k, v in extra.items() if k not in ("expected", "answer")})
        payload["initial"] = initial
        task = Task(env=self.name, query=candidate.query, origin="synthetic", payload=payload, reference_actions=list(candidate.reference_actions))
        expected, answer = self._execute_reference(task)
        refs = list(candidate.reference_actions)
        if answer is not None and refs and parse_tool_calls(refs[-1]):
            refs.append(self.answer_template.format(answer=answer))
        return task.model_copy(update={"payload": {**payload, "expected": expected, "answer": answer}, "reference_actions": refs})
