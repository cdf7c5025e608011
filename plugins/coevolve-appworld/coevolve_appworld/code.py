"""Reading the agent's code without running it: extraction, API calls, descriptions.

Everything here works on text and on Python's ``ast``; nothing is ever evaluated in the SDK's
process (literal arguments are read with ``ast.literal_eval``, which only accepts literals).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

__all__ = ["NoCodeError", "extract_code", "api_calls", "call_arguments", "fence"]

TOOL_NAME = "execute_python"
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)
MAX_CODE_CHARS = 20_000


class NoCodeError(ValueError):
    """The action held no code to run; the message is shown to the agent."""


def fence(code: str) -> str:
    """The canonical action text for ``code``: one fenced Python block."""
    return "```python\n" + code.strip("\n") + "\n```"


def extract_code(action: str) -> str:
    """The Python code of an action.

    Accepted, in this order: ``<tool_call>`` blocks calling ``execute_python`` (their ``code``
    arguments joined), fenced code blocks (``` or ```python; several are joined in order).
    Anything else is refused with a message that tells the agent the format.
    """
    if len(action) > MAX_CODE_CHARS:
        raise NoCodeError(f"the action is {len(action)} characters long; the limit is {MAX_CODE_CHARS}")
    if "<tool_call>" in action:
        from coevolve_sdk import ActionParseError, parse_tool_calls

        try:
            calls = parse_tool_calls(action)
        except ActionParseError as e:
            raise NoCodeError(str(e)) from None
        parts = []
        for c in calls:
            if c.name != TOOL_NAME:
                raise NoCodeError(f"unknown tool '{c.name}'; the only tool is {TOOL_NAME}(code)")
            code = c.arguments.get("code")
            if not isinstance(code, str) or not code.strip():
                raise NoCodeError(f"{TOOL_NAME} needs a non-empty string argument 'code'")
            parts.append(code)
        if parts:
            return "\n".join(parts)
    blocks = [b for b in _FENCE.findall(action) if b.strip()]
    if blocks:
        return "\n".join(b.rstrip() for b in blocks)
    raise NoCodeError(
        "No code found. Put the Python code to run in a ```python fenced block, "
        f"or call the {TOOL_NAME} tool with a 'code' argument."
    )


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def api_calls(code: str) -> list[str]:
    """The ``app.api`` names that ``code`` calls as ``apis.<app>.<api>(...)``, in source order.

    Code that does not parse yields ``[]`` (the world reports the syntax error to the agent).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            path = _dotted(node.func)
            if path and len(path) == 3 and path[0] == "apis":
                found.append((node.lineno, node.col_offset, f"{path[1]}.{path[2]}"))
    return [name for _, _, name in sorted(found)]


def call_arguments(code: str) -> list[tuple[str, dict[str, Any]]]:
    """Each ``apis.<app>.<api>`` call with its literal keyword arguments (others are skipped)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    out: list[tuple[int, int, str, dict[str, Any]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            path = _dotted(node.func)
            if path and len(path) == 3 and path[0] == "apis":
                args: dict[str, Any] = {}
                for kw in node.keywords:
                    if kw.arg is None:
                        continue
                    try:
                        args[kw.arg] = ast.literal_eval(kw.value)
                    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                        continue
                out.append((node.lineno, node.col_offset, f"{path[1]}.{path[2]}", args))
    return [(name, args) for _, _, name, args in sorted(out, key=lambda x: (x[0], x[1]))]


def describe_call(name: str, args: dict[str, Any]) -> str:
    """``simple_note.create_note`` + {title: 'x'} -> "create note in Simple Note with title 'x'"."""
    app, api = name.split(".", 1)
    app_title = " ".join(w.capitalize() for w in app.split("_"))
    text = f"{api.replace('_', ' ')} in {app_title}"
    shown = [(k, v) for k, v in args.items() if k not in ("access_token", "password", "username")]
    if shown:
        text += " with " + " and ".join(f"{k.replace('_', ' ')} {json.dumps(v, ensure_ascii=False)}" for k, v in shown)
    return text
