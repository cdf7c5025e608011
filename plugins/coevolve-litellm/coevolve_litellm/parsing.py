"""Reading the model's replies: JSON values, actions, verdicts, without ever evaluating them.

Models wrap what a stage asked for in prose, reasoning blocks (``<think>``) and code fences.
Each reader here finds the part it needs, or raises ``ReplyParseError`` saying why not, and
the stage counts that as a failure instead of stopping training. The work is bounded (reply
length, decode attempts), so a hostile reply costs little. Nothing a model writes is executed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coevolve_sdk import MAX_ACTION_CHARS, format_tool_call

__all__ = ["ReplyParseError", "extract_json", "extract_action", "parse_judgement", "ReflectionReply", "TaskReply", "MAX_REPLY_CHARS"]

MAX_REPLY_CHARS = 200_000
_MAX_DECODE_ATTEMPTS = 500
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)
_SUCCESS = re.compile(r"^[\s>*_#-]*success[\s*_]*:[\s*_\[]*(true|false)\b", re.IGNORECASE | re.MULTILINE)


class ReplyParseError(ValueError):
    """The model's reply could not be read as what the stage asked for. The message says why."""


def _strip_reasoning(text: str) -> str:
    """Drop ``<think>`` blocks (Qwen3 and other reasoning models emit them before the answer)."""
    return _THINK.sub("", text)


def _reply_body(text: Any) -> str:
    """The reply without its reasoning block; ReplyParseError when it is not text or empty."""
    if not isinstance(text, str):
        raise ReplyParseError(f"reply is {type(text).__name__}, not text")
    body = _strip_reasoning(text)
    if not body.strip():
        raise ReplyParseError("reply is empty")
    return body


def extract_json(text: Any, expect: type | tuple[type, ...] = dict) -> Any:
    """The first JSON value of type ``expect`` found in a model reply.

    Looks in fenced code blocks first, then anywhere in the text (models often wrap the JSON in
    prose). Never evaluates anything. The work is bounded (at most 500 decode attempts, replies up
    to ``MAX_REPLY_CHARS``), so a hostile reply costs little. Raises ``ReplyParseError`` (and nothing else) when the
    reply is not a string, is empty, is too long or holds no such JSON value.
    """
    if isinstance(text, str) and len(text) > MAX_REPLY_CHARS:
        raise ReplyParseError(f"reply is {len(text)} characters long; the limit is {MAX_REPLY_CHARS}")
    body = _reply_body(text).strip()
    want = expect if isinstance(expect, tuple) else (expect,)
    opener = "{["  # both, so that a reply holding the wrong kind of JSON gets a precise message
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(body)] + [body]
    found_other: str | None = None
    attempts = 0
    for chunk in candidates:
        pos = 0
        while attempts < _MAX_DECODE_ATTEMPTS:
            idx = min((i for i in (chunk.find(c, pos) for c in opener) if i >= 0), default=-1)
            if idx < 0:
                break
            attempts += 1
            try:
                value, _ = decoder.raw_decode(chunk, idx)
            except (ValueError, RecursionError):
                pos = idx + 1
                continue
            if isinstance(value, want):
                return value
            found_other = type(value).__name__
            pos = idx + 1
    names = " or ".join("object" if t is dict else "array" if t is list else t.__name__ for t in want)
    if found_other:
        raise ReplyParseError(f"reply holds JSON, but no JSON {names} (found a {found_other})")
    raise ReplyParseError(f"reply holds no JSON {names}")


def extract_action(text: Any) -> str:
    """The action in an exploration reply: the last ``<action>...</action>`` block, or else the
    ``<tool_call>`` blocks written outside any tags. Raises ``ReplyParseError``."""
    body = _reply_body(text)
    blocks = _ACTION.findall(body)
    if blocks:
        action = blocks[-1].strip()
    else:
        calls = _TOOL_CALL_BLOCK.findall(body)
        if not calls:
            raise ReplyParseError("reply has no <action>...</action> block")
        action = "\n".join(c.strip() for c in calls)
    if not action:
        raise ReplyParseError("the <action> block is empty")
    if len(action) > MAX_ACTION_CHARS:
        raise ReplyParseError(f"action is {len(action)} characters long; the limit is {MAX_ACTION_CHARS}")
    return action


def parse_judgement(text: Any) -> bool:
    """``True``/``False`` from a judge reply holding a ``Success: true|false`` line."""
    body = _reply_body(text)
    m = _SUCCESS.search(body)
    if m is None:
        raise ReplyParseError("reply has no 'Success: true' or 'Success: false' line")
    return m.group(1).lower() == "true"


class ReflectionReply(BaseModel):
    """The reflection JSON. Unknown keys are ignored (models add their own); known keys are typed."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(min_length=1)
    failure_cause: str = ""
    instability_pattern: str = ""
    focus_pattern: list[str] = Field(default_factory=list)
    exploration_objectives: list[str] = Field(default_factory=list)
    do_not_repeat: list[str] = Field(default_factory=list)
    focus_tools: list[str] = Field(default_factory=list)

    @field_validator("summary")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("summary is blank")
        return v.strip()

    @field_validator("failure_cause", "instability_pattern", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("focus_pattern", "exploration_objectives", "do_not_repeat", "focus_tools", mode="before")
    @classmethod
    def _one_is_a_list(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v


class TaskReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    description: str = ""
    query: str = Field(min_length=1)
    reference_actions: list[str]
    completion_criterion: str = ""

    @field_validator("reference_actions", mode="before")
    @classmethod
    def _actions_as_text(cls, v: Any) -> Any:
        # Models sometimes write a tool call as an object instead of the action text: accept
        # {"name", "arguments"} objects and render them in the canonical <tool_call> form.
        if not isinstance(v, list):
            return v
        out = []
        for a in v:
            if isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("arguments", {}), dict):
                out.append(format_tool_call(a["name"], a.get("arguments", {})))
            else:
                out.append(a)
        return out
