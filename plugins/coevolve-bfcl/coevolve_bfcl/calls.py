"""Reading tool calls out of agent text and checking them before anything runs.

Two formats are accepted:

* Hermes/Qwen blocks ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (several per
  message), read by :func:`coevolve_sdk.env.actions.parse_tool_calls` (``json`` only);
* BFCL's python-call list ``[cd(folder="docs"), ls(a=True)]``, read with ``ast.parse`` and
  ``ast.literal_eval`` on each argument. Only plain literals are accepted as arguments (strings,
  numbers, booleans, None, lists, tuples, dicts); names, attribute access, nested calls,
  operators, comprehensions and lambdas are rejected. Nothing is ever passed to ``eval``.

A checked call is rendered back to a canonical call string (``name(k=repr(v), ...)``), which
is what BFCL's checker receives: a known method name and literal arguments, nothing else.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from coevolve_sdk import MAX_ACTION_CHARS, ActionParseError, ToolCall, parse_tool_calls

__all__ = [
    "CallError", "ParsedAction", "parse_action", "parse_python_calls", "check_arguments",
    "canonical_call", "format_result", "call_to_toolcall", "MAX_INT", "MAX_DEPTH",
]

#: Integers beyond this are refused: BFCL's data never comes close (largest argument 987,654),
#: and huge integers make some backends (``MathAPI.power``) compute for minutes.
MAX_INT = 10**15
MAX_DEPTH = 20
#: A message that opens like ``[name(`` is taken as an attempt at a python-style call list
#: (and reported if it does not parse); anything else without ``<tool_call>`` is an answer.
_CALL_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


class CallError(ValueError):
    """A call that cannot be executed; the message is shown to the agent."""


@dataclass
class ParsedAction:
    """The calls of one agent message, in the order written. ``fmt`` is "tool_call",
    "python" or "none" (a plain answer)."""

    calls: list[ToolCall] = field(default_factory=list)
    positional: list[list[Any]] = field(default_factory=list)
    fmt: str = "none"


def _python_list_text(text: str) -> str | None:
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    if _CALL_LIST_START.match(s):
        return s
    return None


def _literal(node: ast.AST, where: str) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallError(
            f"{where} must be a plain literal (string, number, true/false, None, list or dict); "
            f"got a {type(node).__name__} expression"
        ) from None
    return _to_json_like(value, where, 0)


def _to_json_like(v: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CallError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, (list, tuple)):
        return [_to_json_like(x, where, depth + 1) for x in v]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise CallError(f"{where}: dictionary keys must be strings, got {type(k).__name__}")
            out[k] = _to_json_like(x, where, depth + 1)
        return out
    raise CallError(f"{where}: values of type {type(v).__name__} are not accepted")


def parse_python_calls(text: str) -> tuple[list[ToolCall], list[list[Any]]]:
    """Calls in BFCL's ``[f(a=1), g("x")]`` syntax; positional arguments are returned apart
    (they are bound to parameter names later, from the backend method's signature)."""
    if len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"action is {len(text)} characters long; the limit is {MAX_ACTION_CHARS}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise ActionParseError(f"the python-style call list does not parse ({type(e).__name__}: {str(e)[:120]})") from None
    body = tree.body
    if not isinstance(body, (ast.List, ast.Tuple)):
        raise ActionParseError("a python-style action must be a list of calls like [func(a=1), other(b='x')]")
    calls: list[ToolCall] = []
    positional: list[list[Any]] = []
    for i, el in enumerate(body.elts):
        if not isinstance(el, ast.Call):
            raise ActionParseError(f"item {i} of the call list is not a function call")
        if not isinstance(el.func, ast.Name):
            raise ActionParseError(f"item {i}: only plain function names can be called (no attributes, no expressions)")
        name = el.func.id
        pos = [_literal(a, f"argument {j + 1} of {name}") for j, a in enumerate(el.args)]
        kwargs: dict[str, Any] = {}
        for kw in el.keywords:
            if kw.arg is None:
                raise ActionParseError(f"{name}: '**' arguments are not accepted")
            if kw.arg in kwargs:
                raise ActionParseError(f"{name}: argument '{kw.arg}' given twice")
            kwargs[kw.arg] = _literal(kw.value, f"argument '{kw.arg}' of {name}")
        calls.append(ToolCall(name=name, arguments=kwargs))
        positional.append(pos)
    return calls, positional


def parse_action(text: str) -> ParsedAction:
    """All calls of one agent message. Raises ``ActionParseError`` or ``CallError`` for a
    message that tries to call something but is malformed; returns ``fmt="none"`` for a plain
    answer."""
    if len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"action is {len(text)} characters long; the limit is {MAX_ACTION_CHARS}")
    if "<tool_call>" in text:
        try:
            calls = parse_tool_calls(text)
        except ActionParseError:
            raise
        except (RecursionError, ValueError, TypeError) as e:
            raise ActionParseError(f"tool call could not be read ({type(e).__name__})") from None
        return ParsedAction(calls=calls, positional=[[] for _ in calls], fmt="tool_call")
    src = _python_list_text(text)
    if src is None and _FENCE.match(text.strip()):
        raise ActionParseError(
            "code is never run here; call tools with <tool_call> blocks (or a [func(arg=value)] list)")
    if src is not None:
        calls, positional = parse_python_calls(src)
        return ParsedAction(calls=calls, positional=positional, fmt="python" if calls else "none")
    return ParsedAction()


# ---------------------------------------------------------------- argument checking
_TYPE_NAMES = {
    "string": "a string", "integer": "an integer", "float": "a number", "number": "a number",
    "boolean": "true or false", "array": "a list", "tuple": "a list", "dict": "an object", "object": "an object",
}


#: Where BFCL's own ground truth disagrees with its function docs, the data wins (else the
#: official answer could not be replayed): scenario 173 passes ticket ids like 'ticket_001'
#: to ``close_ticket``, whose doc says integer.
SCHEMA_QUIRKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("close_ticket", "ticket_id"): ("string",),
}


def _check_type(value: Any, schema: dict[str, Any], where: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise CallError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    t = schema.get("type")
    if isinstance(value, bool):
        ok = t in (None, "any", "boolean")
    elif isinstance(value, int):
        ok = t in (None, "any", "integer", "float", "number")
        if abs(value) > MAX_INT:
            raise CallError(f"{where} = {str(value)[:30]}... is out of range (at most {MAX_INT:.0e} in magnitude)")
    elif isinstance(value, float):
        ok = t in (None, "any", "float", "number")
        if not math.isfinite(value):
            raise CallError(f"{where} must be a finite number")
    elif isinstance(value, str):
        ok = t in (None, "any", "string")
    elif isinstance(value, list):
        ok = t in (None, "any", "array", "tuple")
        items = schema.get("items")
        if ok and isinstance(items, dict):
            for i, x in enumerate(value):
                _check_type(x, items, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        ok = t in (None, "any", "dict", "object")
        props = schema.get("properties")
        if ok and isinstance(props, dict):
            for k, x in value.items():
                if k in props and isinstance(props[k], dict):
                    _check_type(x, props[k], f"{where}.{k}", depth + 1)
    elif value is None:
        ok = t in (None, "any")
    else:
        ok = False
    if not ok:
        got = "null" if value is None else type(value).__name__
        raise CallError(f"{where} must be {_TYPE_NAMES.get(str(t), t)}, got {got}")


#: Arguments that make a backend compute for a very long time (checked after binding).
_GUARDS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "power": lambda a: "exponent is too large (at most 10000 in magnitude)"
    if isinstance(a.get("exponent"), (int, float)) and abs(a["exponent"]) > 10_000 else None,
    "logarithm": lambda a: "precision must be between 0 and 1000"
    if isinstance(a.get("precision"), int) and not 0 <= a["precision"] <= 1000 else None,
    "square_root": lambda a: "precision must be between 0 and 1000"
    if isinstance(a.get("precision"), int) and not 0 <= a["precision"] <= 1000 else None,
    "round_number": lambda a: "decimal_places must be between -1000 and 1000"
    if isinstance(a.get("decimal_places"), int) and abs(a["decimal_places"]) > 1000 else None,
    "tail": lambda a: "lines must be between 0 and 100000"
    if isinstance(a.get("lines"), int) and not 0 <= a["lines"] <= 100_000 else None,
}


def check_arguments(name: str, method: Callable[..., Any], doc: dict[str, Any],
                    kwargs: dict[str, Any], positional: list[Any] | None = None) -> dict[str, Any]:
    """Bind ``positional``/``kwargs`` to the method's parameters and check each value against
    BFCL's JSON schema for the function. Returns the keyword arguments to call with."""
    sig = inspect.signature(method)
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    names = [p.name for p in params]
    bound: dict[str, Any] = {}
    positional = positional or []
    pos_ok = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    if len(positional) > len(pos_ok):
        raise CallError(f"{name} takes at most {len(pos_ok)} positional arguments, got {len(positional)}")
    for p, v in zip(pos_ok, positional):
        bound[p.name] = v
    for k, v in kwargs.items():
        if not isinstance(k, str) or k not in names:
            raise CallError(f"{name} has no parameter '{str(k)[:60]}'; its parameters are {names}")
        if k in bound:
            raise CallError(f"{name}: argument '{k}' given twice")
        bound[k] = v
    missing = [p.name for p in params if p.default is inspect.Parameter.empty and p.name not in bound]
    if missing:
        raise CallError(f"{name} is missing required argument(s) {missing}")
    props = (doc.get("parameters") or {}).get("properties") or {}
    for k, v in bound.items():
        schema = props.get(k) if isinstance(props.get(k), dict) else {}
        if v is None:
            default = sig.parameters[k].default
            if default is None or schema.get("type") in (None, "any"):
                continue
            raise CallError(f"{name}: '{k}' must not be null")
        extra = SCHEMA_QUIRKS.get((name, k), ())
        if extra:
            try:
                _check_type(v, schema, f"{name}: '{k}'")
            except CallError:
                _check_type(v, {"type": extra[0]}, f"{name}: '{k}'")
        else:
            _check_type(v, schema, f"{name}: '{k}'")
    guard = _GUARDS.get(name)
    if guard is not None:
        problem = guard(bound)
        if problem:
            raise CallError(f"{name}: {problem}")
    return bound


def canonical_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(k=repr(v), ...)``: a python call with literal arguments only, the form BFCL's
    checker executes."""
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"


def call_to_toolcall(call: str) -> tuple[ToolCall, list[Any]]:
    """Read one call string of BFCL ground truth (``f(a=1)`` or ``f('x')``)."""
    calls, positional = parse_python_calls("[" + call + "]")
    if len(calls) != 1:
        raise CallError(f"expected exactly one call in {call!r}")
    return calls[0], positional[0]


def format_result(result: Any) -> str:
    """A backend's return value as text, exactly as BFCL's executor renders it (so that the
    agent sees what the checker compares)."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:
            return str(result)
    return str(result)
