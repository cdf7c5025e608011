"""Tools and a worked example written into the conversation, for chat templates that drop ``tools=``.

Many small instruct models (SmolLM2's ChatML template among them) have a chat template that
ignores the ``tools`` argument: rendered with it, the prompt silently lacks the tool list, and
the model never learns what it may call. Measured on SmolLM2-135M-Instruct, a tool list alone is
not enough either: it answers in prose. With one worked example (a request, the calls that do
it, their results, the closing answer) it answers with calls in the example's format.

So the ``hf`` policy can (option ``tools_in_prompt: system``) put the tool list, how to call a
tool, and a worked example into the system message before rendering. The example comes from the
environment itself (``tool_example: auto``): its first training task with a tool call, whose
reference actions are executed in a fresh instance to record the real observations. The example
is therefore in the environment's own action format, whatever that is, and depends on nothing
else the policy knows.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DEFAULT_INSTRUCTIONS", "tools_block", "worked_example", "with_tools_in_system"]

#: ``{tools}`` is replaced (plain text replacement, other braces are kept) by one JSON object per
#: line (name, description, parameters).
DEFAULT_INSTRUCTIONS = (
    "You can call these tools:\n{tools}\n\n"
    "To call a tool, reply with exactly one block and nothing else:\n"
    '<tool_call>\n{"name": "tool_name", "arguments": {"argument": "value"}}\n</tool_call>\n'
    "The result comes back in the next message. When the request is done, reply in plain text without a tool call."
)


def tools_block(tools: list[dict[str, Any]]) -> str:
    """One JSON line per tool: OpenAI-style specs are unwrapped to their ``function`` part."""
    lines = []
    for t in tools:
        spec = t.get("function", t) if isinstance(t, dict) else t
        lines.append(json.dumps(spec, ensure_ascii=False))
    return "\n".join(lines)


def worked_example(env: Any, max_actions: int = 6, max_chars: int = 600) -> str | None:
    """A worked example from ``env``'s first training task whose reference actions call a tool:
    ``User:``, then each ``Assistant:`` action with the ``Tool:`` observation the environment
    really returned. None when the environment has no such task or replaying it fails."""
    try:
        tasks = env.tasks("train")
    except Exception:
        return None
    for task in tasks[:50]:
        actions = list(task.reference_actions or [])[:max_actions]
        if not any("<tool_call>" in a or "{" in a for a in actions[:-1] or actions):
            continue
        try:
            env.reset(seed=0, options={"task": task})
            lines = [f"User: {task.query}"]
            for a in actions:
                obs, _, terminated, truncated, info = env.step(a)
                lines.append(f"Assistant: {a}")
                said = [m.get("content", "") for m in info.get("messages", []) if m.get("role") == "tool"]
                if said:
                    lines.append("Tool: " + " | ".join(str(s)[:max_chars] for s in said))
                # a multi-turn environment's next request (BFCL) arrives as a user message
                lines.extend(f"User: {str(m.get('content', ''))[:max_chars]}" for m in info.get("messages", []) if m.get("role") == "user")
                if terminated or truncated:
                    break
            while len(lines) > 1 and lines[-1].startswith("User: "):  # a request the example does not answer
                lines.pop()
            return "\n".join(lines)
        except Exception:
            continue
    return None


def with_tools_in_system(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, instructions: str = DEFAULT_INSTRUCTIONS, example: str | None = None
) -> list[dict[str, Any]]:
    """``messages`` with the tool list, the call format and ``example`` appended to the system
    message (one is added when there is none). The list passed to the template afterwards is
    empty: the tools are in the text now."""
    parts: list[str] = []
    if tools:
        parts.append(instructions.replace("{tools}", tools_block(tools)))
    if example:
        parts.append("Example:\n" + example)
    if not parts:
        return list(messages)
    extra = "\n\n".join(parts)
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        base = str(out[0].get("content") or "")
        out[0]["content"] = (base + "\n\n" + extra) if base else extra
    else:
        out.insert(0, {"role": "system", "content": extra})
    return out
