"""Parsing the agent's tool calls out of model text, without ever evaluating it.

Models emit Hermes/Qwen style blocks: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
possibly several per message. Environments share this parser so that the action format is the
same everywhere; an environment may accept more formats on top (BFCL also reads python-call
syntax).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["ToolCall", "ActionParseError", "parse_tool_calls", "calls_in", "format_tool_call"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
MAX_ACTION_CHARS = 20_000


class ToolCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ActionParseError(ValueError):
    """The text held no well-formed tool call. The message is shown to the agent as feedback."""


def parse_tool_calls(text: str) -> list[ToolCall]:
    """All tool calls in ``text``; ``[]`` when the text holds none (a plain answer).

    Raises ActionParseError when a ``<tool_call>`` block is present but malformed, so the
    environment can tell the agent what was wrong instead of silently treating it as an answer.
    """
    if len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"action is {len(text)} characters long; the limit is {MAX_ACTION_CHARS}")
    calls: list[ToolCall] = []
    for raw in _BLOCK.findall(text):
        body = raw.strip()
        if not body:
            raise ActionParseError("empty <tool_call> block")
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            raise ActionParseError(f"tool call is not valid JSON ({e.msg} at position {e.pos})") from None
        if not isinstance(obj, dict):
            raise ActionParseError("tool call must be a JSON object with 'name' and 'arguments'")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ActionParseError("tool call has no string 'name'")
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                raise ActionParseError(f"arguments of '{name}' are a string that is not JSON") from None
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ActionParseError(f"arguments of '{name}' must be a JSON object")
        calls.append(ToolCall(name=name, arguments=args))
    return calls


def calls_in(*actions: str) -> list[ToolCall]:
    """Every well-formed tool call of ``actions``, in order, passing over any action that holds
    none or a malformed one. For reading what a trajectory did (describing it, counting tools,
    varying it), where a bad action is simply not a call; an environment answering the agent
    uses ``parse_tool_calls``, whose error it shows."""
    out: list[ToolCall] = []
    for action in actions:
        try:
            out.extend(parse_tool_calls(action))
        except ActionParseError:
            continue
    return out


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The canonical text of one call, as the chat templates render it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"
