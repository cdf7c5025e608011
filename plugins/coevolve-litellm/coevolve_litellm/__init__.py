"""CoEvolve's LLM teacher through litellm (see ``docs/teacher.md``).

The names below are loaded on first use, so that importing the plugin module (which the core's
registry does at start-up for every installed plugin) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevolve_sdk import lazy_exports

__all__ = [
    "LiteLLMTeacher",
    "LiteLLMTeacherOptions",
    "TeacherBudget",
    "LiteLLMClient",
    "TeacherCallError",
    "ReplyParseError",
    "PromptSet",
    "Prompt",
    "DEFAULT_ACTION_FORMAT",
    "extract_json",
    "extract_action",
    "parse_judgement",
]

_WHERE = {
    "LiteLLMTeacher": "teacher",
    "LiteLLMTeacherOptions": "options",
    "TeacherBudget": "options",
    "LiteLLMClient": "client",
    "TeacherCallError": "client",
    "ReplyParseError": "parsing",
    "extract_json": "parsing",
    "extract_action": "parsing",
    "parse_judgement": "parsing",
    "PromptSet": "prompts",
    "Prompt": "prompts",
    "DEFAULT_ACTION_FORMAT": "prompts",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .client import LiteLLMClient, TeacherCallError
    from .options import LiteLLMTeacherOptions, TeacherBudget
    from .parsing import ReplyParseError, extract_action, extract_json, parse_judgement
    from .prompts import DEFAULT_ACTION_FORMAT, Prompt, PromptSet
    from .teacher import LiteLLMTeacher


__getattr__, __dir__ = lazy_exports(__name__, {name: f".{module}" for name, module in _WHERE.items()})
