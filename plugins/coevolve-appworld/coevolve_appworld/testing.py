"""A policy that replays known code, one statement per turn: AppWorld episodes without a model.

Tests and ``bench/appworld_concurrency.py`` use it to drive the core rollout loop through real
worker processes, so that what is measured or checked is the environment side alone. It is an
honest ``Policy`` (token ids, logprobs, an end-of-turn token), it just does not learn.
"""

from __future__ import annotations

import ast
from typing import Any

from coevolve_sdk import Generation, Policy, Task

from .code import NoCodeError, extract_code, fence

__all__ = ["ScriptPolicy", "statements"]

_EOS, _OBS, _PROMPT, _TURN = 0, 1, 10, 100_000


def statements(code: str) -> list[str]:
    """The top-level statements of ``code``, each as its own source text."""
    tree = ast.parse(code)
    return [ast.get_source_segment(code, node) or "" for node in tree.body]


class ScriptPolicy(Policy):
    """For an episode of ``tasks[i]``, turn ``n`` sends the ``n``-th statement of the task's
    reference code (the last one again once the script is used up).

    The task is recognised by its instruction in the opening user message."""

    name = "appworld-script"

    def __init__(self, tasks: list[Task]) -> None:
        self.eos_token_id = _EOS
        self.queries = [t.query for t in tasks]
        self.scripts: list[list[str]] = []
        for t in tasks:
            try:
                code = "\n".join(extract_code(a) for a in t.reference_actions)
            except NoCodeError as e:
                raise ValueError(f"task {t.id} has no reference code to replay: {e}") from None
            self.scripts.append([fence(s) for s in statements(code)])

    def encode_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        user = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        for i, q in enumerate(self.queries):
            if q in user:
                return [_PROMPT + i]
        raise ValueError("the opening message names none of the scripted tasks")

    def encode_followup(self, messages: list[dict[str, Any]]) -> list[int]:
        return [_OBS]

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 greedy: bool = False) -> list[Generation]:
        out = []
        for ids in prompts:
            script = self.scripts[ids[0] - _PROMPT]
            turn = sum(1 for t in ids if t == _EOS)
            text = script[min(turn, len(script) - 1)]
            out.append(Generation(token_ids=[_TURN + turn, _EOS], logprobs=[0.0, 0.0], text=text, finished=True))
        return out

    def decode(self, token_ids: list[int]) -> str:
        return ""
