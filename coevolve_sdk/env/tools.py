"""The tools of a ToolEnv: typed methods marked with ``@tool``, read into JSON schemas, strict
argument models, return checks and samplers over the live state.

Everything here is about one tool at a time and needs no environment; ``toolenv.py`` builds the
environment (episodes, dispatch, tasks by execution) on top of it.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import typing
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Sequence

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.records import ToolSpec

__all__ = ["ToolError", "ToolInfo", "ArgInfo", "CallResult", "StateSampler", "tool", "from_state", "call", "parse_docstring"]


class ToolError(Exception):
    """Raised by a tool for a mistake of the agent (a missing key, a move the rules forbid).

    Its message is what the agent reads (after ``Error: ``); the episode goes on. Any other
    exception raised by a tool counts as a bug in the tool: the agent still gets an error
    observation, but ``check_env`` reports it."""


@dataclass(frozen=True)
class StateSampler:
    """Where ``sample_action`` draws an argument from; see :func:`from_state`."""

    values: Callable[..., Iterable[Any]] | Sequence[Any]
    takes_drawn: bool = False

    def candidates(self, env: Any, drawn: dict[str, Any] | None = None) -> list[Any]:
        if not callable(self.values):
            return list(self.values)
        return list(self.values(env, dict(drawn or {})) if self.takes_drawn else self.values(env))


def from_state(values: Callable[..., Iterable[Any]] | Sequence[Any]) -> StateSampler:
    """Mark an argument as drawn, in exploration, from values of the live environment.

    Use it inside ``Annotated``: ``key: Annotated[str, from_state(lambda env: sorted(env.store))]``
    ("a key that exists"). ``values`` is a fixed sequence, a function of the environment, or a
    function of the environment and the arguments drawn so far (in signature order), for
    arguments that depend on each other: ``from_state(lambda env, args: env.loans[args["member"]])``
    ("a book this member has borrowed"). It only steers ``sample_action``; validation still
    accepts any value of the type, so the agent can ask for a key that does not exist and get
    the tool's own error. When there is nothing to draw (an empty store) the tool is not
    sampled at that moment.
    """
    if callable(values):
        try:
            params = [p for p in inspect.signature(values).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        return StateSampler(values, takes_drawn=len(params) >= 2)
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"from_state takes a function of the environment or a sequence of values, got {type(values).__name__}")
    return StateSampler(values)


@dataclass
class ArgInfo:
    name: str
    annotation: Any
    description: str
    required: bool
    sampler: StateSampler | None


@dataclass
class ToolInfo:
    """What ToolEnv knows about one tool (``Env.tool_infos()`` lists them)."""

    name: str
    method: str
    description: str
    args: list[ArgInfo]
    model: type[BaseModel]
    spec: ToolSpec
    phrase: str | None = None
    answers: bool = False
    ends_episode: bool = False
    explore: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    returns: Any = None
    """The return annotation (None when the tool declares none: its results are not checked)."""
    return_check: Callable[[Any], bool] | None = None
    """Whether a result is of the declared return type (strict: ``"3"`` is not an int)."""


_MARK = "__coevolve_tool__"


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    phrase: str | None = None,
    answers: bool = False,
    ends_episode: bool = False,
    explore: bool = True,
    strict: bool = True,
) -> Any:
    """Mark a ToolEnv method as a tool the agent can call.

    * ``name``: the tool's name for the agent (default: the method's name; needed when the
      natural name is taken by the environment API, e.g. a tool called ``reset``);
    * ``phrase``: how ``describe`` says a call in a request, a ``str.format`` template over the
      arguments, e.g. ``"move {n} {item} from {src} to {dst}"``;
    * ``answers``: the result is information the user asked for: a task whose last call is this
      tool expects its result in the final message (``payload["answer"]``);
    * ``ends_episode``: a successful call ends the episode (a ``submit`` tool);
    * ``explore``: False keeps the tool out of ``sample_action``;
    * ``strict``: validate JSON types exactly (no ``"3"`` for an int); False lets pydantic coerce.
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        if isinstance(f, (staticmethod, classmethod)) or not inspect.isfunction(f):
            raise TypeError(f"@tool marks a plain method of a ToolEnv subclass, not {type(f).__name__}")
        setattr(f, _MARK, {"name": name or f.__name__, "phrase": phrase, "answers": answers, "ends_episode": ends_episode,
                           "explore": explore, "strict": strict})
        return f

    return mark(fn) if fn is not None else mark


def call(name: str, **arguments: Any) -> str:
    """The action text of one tool call: ``call("set", key="a", value=1)``."""
    return format_tool_call(name, arguments)


# ---------------------------------------------------------------------- docstrings
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and the per-argument descriptions of a
    Google-style (``Args:``) or Sphinx-style (``:param x:``) docstring."""
    if not doc:
        return "", {}
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None  # None: the summary; "args": an argument list; other: skipped
    current: str | None = None
    arg_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        sphinx = _SPHINX.match(stripped)
        if sphinx:
            section, current = "sphinx", sphinx.group(1)
            args[current] = sphinx.group(2)
            continue
        header = _SECTION.match(stripped) if indent == 0 else None
        if header:
            section = "args" if header.group(1) in ("Args", "Arguments", "Parameters", "Params") else "other"
            current, arg_indent = None, None
            continue
        if section is None:
            summary.append(stripped)
        elif section == "args" and indent > 0:
            m = _ARG_LINE.match(stripped)
            if m and (arg_indent is None or indent <= arg_indent):
                current, arg_indent = m.group(1).lstrip("*"), indent
                args[current] = m.group(2)
            elif current is not None:
                args[current] += " " + stripped
        elif section == "sphinx" and current is not None and stripped and not stripped.startswith(":"):
            args[current] += " " + stripped
        elif stripped.startswith(":"):
            current = None
        elif indent == 0 and stripped:
            section, current = "other", None
    text = " ".join(" ".join(summary).split())
    return text, {k: " ".join(v.split()) for k, v in args.items()}


# ---------------------------------------------------------------------- schema building
def _strip_titles(schema: Any) -> Any:
    """pydantic's schema without its generated ``title`` keys (noise in every prompt)."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k == "title" and isinstance(v, str):
                continue
            if k in ("properties", "$defs") and isinstance(v, dict):
                out[k] = {pk: _strip_titles(pv) for pk, pv in v.items()}
            else:
                out[k] = _strip_titles(v)
        return out
    if isinstance(schema, list):
        return [_strip_titles(x) for x in schema]
    return schema


def _samplers(annotation: Any) -> list[StateSampler]:
    if typing.get_origin(annotation) is typing.Annotated:
        return [m for m in typing.get_args(annotation)[1:] if isinstance(m, StateSampler)]
    return []


def _build_tool(owner: type, method_name: str, fn: Callable[..., Any], meta: dict[str, Any]) -> ToolInfo:
    tname = meta["name"]
    where = f"{owner.__name__}.{method_name}"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", tname):
        raise TypeError(f"tool {where}: name '{tname}' must be 1-64 letters, digits, '_', '.' or '-'")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise TypeError(f"tool {where}: its type hints cannot be resolved ({type(e).__name__}: {e}); "
                        "define the names they use at module level, before the class") from None
    summary, arg_docs = parse_docstring(fn.__doc__)
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "self":
        raise TypeError(f"tool {where}: a tool is a method; its first parameter must be self")
    fields: dict[str, Any] = {}
    args: list[ArgInfo] = []
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {where}: *{p.name} is not allowed; every argument needs a name and a type")
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"tool {where}: argument '{p.name}' is positional-only; tools are called with keyword arguments")
        if p.name not in hints:
            raise TypeError(f"tool {where}: argument '{p.name}' has no type hint; ToolEnv builds the JSON schema and the validation from it")
        ann = hints[p.name]
        desc = arg_docs.get(p.name, "")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (typing.Annotated[ann, Field(description=desc or None)], default)
        samplers = _samplers(ann)
        args.append(ArgInfo(p.name, ann, desc, default is ..., samplers[-1] if samplers else None))
    unknown = sorted(set(arg_docs) - {a.name for a in args})
    if unknown:
        raise TypeError(f"tool {where}: the docstring describes {', '.join(unknown)}, which the signature does not have")
    try:
        with warnings.catch_warnings():  # "field shadows a BaseModel attribute": harmless here
            warnings.simplefilter("ignore")
            model = create_model(  # type: ignore[call-overload]
                f"{owner.__name__}_{tname}_arguments",
                __config__=ConfigDict(extra="forbid", strict=meta["strict"]),
                **fields,
            )
        schema = _strip_titles(model.model_json_schema())
    except Exception as e:
        raise TypeError(f"tool {where}: its arguments do not make a pydantic model / JSON schema ({type(e).__name__}: {e}); "
                        "use JSON-friendly types (str, int, float, bool, Literal, list, dict, pydantic models)") from None
    schema.pop("additionalProperties", None)
    schema.setdefault("properties", {})
    spec = ToolSpec(name=tname, description=summary, parameters=schema)
    returns = hints.get("return", inspect.Parameter.empty)
    info = ToolInfo(name=tname, method=method_name, description=summary, args=args, model=model, spec=spec,
                    phrase=meta["phrase"], answers=meta["answers"], ends_episode=meta["ends_episode"], explore=meta["explore"],
                    returns=None if returns is inspect.Parameter.empty else returns, return_check=_return_checker(returns))
    if info.phrase:
        missing = sorted(set(re.findall(r"{(\w+)", info.phrase)) - {a.name for a in args})
        if missing:
            raise TypeError(f"tool {where}: phrase '{info.phrase}' names {', '.join(missing)}, which are not arguments")
    return info


def _return_checker(ann: Any) -> Callable[[Any], bool] | None:
    """A strict test of a result against a tool's return annotation, or None when any value
    goes (no annotation, ``Any``, ``object``). pydantic judges the types it knows (``int``,
    ``list[str]``, ``dict[str, int]``, ``Literal``, models, unions, ``None``...); any other class
    is an ``isinstance`` test."""
    if ann is inspect.Parameter.empty or ann is Any or ann is object:
        return None
    if typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    from pydantic import TypeAdapter

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(ann)
    except Exception:
        if isinstance(ann, type):
            return lambda value: isinstance(value, ann)
        return None

    def check(value: Any) -> bool:
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError:
            return False
        return True

    return check


def _type_name(ann: Any) -> str:
    """A type as it is written in code: ``int``, ``list[str]``, ``str | None``."""
    if isinstance(ann, type) and not typing.get_args(ann):
        return ann.__qualname__ if ann.__module__ in ("builtins", "typing") else f"{ann.__module__}.{ann.__qualname__}"
    return str(ann).replace("typing.", "")


def _value_type(value: Any) -> str:
    """The type of a returned value, with the element types of a short list/tuple/dict."""
    t = type(value)
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    if isinstance(value, (list, tuple, set)) and value:
        inner = sorted({type(v).__qualname__ for v in list(value)[:50]})
        return f"{name}[{' | '.join(inner)}]"
    if isinstance(value, dict) and value:
        keys = sorted({type(k).__qualname__ for k in list(value)[:50]})
        vals = sorted({type(v).__qualname__ for v in list(value.values())[:50]})
        return f"{name}[{' | '.join(keys)}, {' | '.join(vals)}]"
    return name


def _domain(model: type[BaseModel], arg: ArgInfo) -> list[Any] | tuple[float, float, bool] | None:
    """The values sample_action may draw for an argument without a sampler: a list of choices,
    a (low, high, is_int) range, or None when the type has no small domain."""
    f = model.model_fields[arg.name]
    ann = f.annotation
    if typing.get_origin(ann) is Literal:
        return list(typing.get_args(ann))
    if ann is bool:
        return [False, True]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return [m.value for m in ann]
    if ann in (int, float):
        lo = hi = None
        for m in f.metadata:
            if isinstance(m, annotated_types.Ge):
                lo = m.ge
            elif isinstance(m, annotated_types.Gt):
                lo = m.gt + 1 if ann is int else m.gt
            elif isinstance(m, annotated_types.Le):
                hi = m.le
            elif isinstance(m, annotated_types.Lt):
                hi = m.lt - 1 if ann is int else m.lt
        if lo is not None and hi is not None and lo <= hi:
            return (lo, hi, ann is int)
    return None


def _format_validation(tool_name: str, e: ValidationError, allowed: list[str]) -> str:
    parts = []
    for err in e.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"])
        if err["type"] == "missing":
            parts.append(f"missing argument '{loc}'")
        elif err["type"] == "extra_forbidden":
            parts.append(f"'{loc}' is not an argument of '{tool_name}' (its arguments: {', '.join(allowed) or 'none'})")
        else:
            shown = json.dumps(err.get("input"), default=str)[:60]
            parts.append(f"argument '{loc}': {err['msg']} (got {shown})")
    return f"bad arguments for '{tool_name}': " + "; ".join(parts)


@dataclass
class CallResult:
    """One call's outcome (``ToolEnv.run_call``): the text the agent reads, or the error (and,
    for an exception that is not a user error, the bug with its traceback)."""

    name: str
    text: str
    error: str | None = None
    bug: str | None = None
    tool: ToolInfo | None = None


