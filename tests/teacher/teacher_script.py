"""The scripted teacher behind the tests: a litellm ``CustomLLM`` answering from a Python function.

The remote model is the only thing replaced: every request goes through litellm's real
``completion``/``acompletion`` code path (parameter mapping, exception types, usage objects).
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Callable

from coevolve_sdk.env.actions import format_tool_call

Script = Callable[[str, list[dict[str, Any]]], Any]


class Scripted:
    """Builds the CustomLLM lazily (litellm is imported only by tests that use it)."""

    def __init__(self, script: Script, delay_s: float = 0.0) -> None:
        self.script = script
        self.delay_s = delay_s
        self.calls: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def stages(self) -> list[str]:
        return [c["stage"] for c in self.calls]

    def respond(self, model: str, messages: list[dict[str, Any]], api_key: Any, optional_params: dict, litellm_params: dict | None) -> Any:
        from litellm import ModelResponse
        from litellm.types.utils import Choices, Message, Usage

        stage = ((litellm_params or {}).get("metadata") or {}).get("coevolve_stage", "?")
        with self._lock:
            self.calls.append({"stage": stage, "model": model, "messages": messages, "api_key": api_key, "params": dict(optional_params)})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            out = self.script(stage, messages)
        finally:
            with self._lock:
                self.in_flight -= 1
        if isinstance(out, BaseException):
            raise out
        if callable(out):  # a factory of a litellm exception needing the model name
            raise out(model)
        resp = ModelResponse(model=model)
        resp.choices = [Choices(index=0, message=Message(role="assistant", content=out), finish_reason="stop")]
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        pt, ct = prompt_chars // 4 + 1, len(out or "") // 4 + 1
        resp.usage = Usage(prompt_tokens=pt, completion_tokens=ct, total_tokens=pt + ct)
        return resp

    def handler(self) -> Any:
        from litellm import CustomLLM

        outer = self

        class ScriptedTeacherLLM(CustomLLM):
            def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None, *args, **kwargs):  # type: ignore[override]
                return outer.respond(model, messages, api_key, optional_params, litellm_params)

            async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None, *args, **kwargs):  # type: ignore[override]
                return outer.respond(model, messages, api_key, optional_params, litellm_params)

        return ScriptedTeacherLLM()


# ------------------------------------------------------------------------------ a scripted teacher
SEED_ACTIONS = [
    format_tool_call("get", {"key": "colour"}),
    format_tool_call("set", {"key": "colour", "value": "green"}),
    format_tool_call("set", {"key": "owner", "value": "bob"}),
    format_tool_call("delete", {"key": "size"}),
    format_tool_call("list_keys", {}),
]

REFLECTION = {
    "summary": "Asked to recolour an item and set its owner, the agent read the colour and then stopped without writing anything.",
    "failure_cause": "The agent never called set, so the store kept its old colour.",
    "instability_pattern": "It reads before writing and then forgets the write.",
    "focus_pattern": ["get>set"],
    "exploration_objectives": ["change values with set", "combine set with delete"],
    "do_not_repeat": ["stopping after a read"],
    "focus_tools": ["set"],
}


def history_steps(messages: list[dict[str, Any]]) -> int:
    """How many actions the explorer has already taken in this run (read from the prompt)."""
    user = messages[-1]["content"]
    return len(re.findall(r"^Action: ", user, flags=re.MULTILINE))


def run_actions(messages: list[dict[str, Any]]) -> list[list[tuple[str, bool]]]:
    """The (action, ok) pairs of each exploration run shown in an abstraction prompt."""
    user = messages[-1]["content"]
    runs = []
    for block in re.split(r"^### Run \d+$", user, flags=re.MULTILINE)[1:]:
        pairs = re.findall(r"- step \d+ \[(ok|ERROR)\]\n  action: (.*?)\n  observation:", block, flags=re.DOTALL)
        runs.append([(a, s == "ok") for s, a in pairs])
    return runs


def good_teacher(stage: str, messages: list[dict[str, Any]]) -> str:
    """A teacher that does what the prompts ask: used for the end-to-end path."""
    if stage == "reflect":
        return "Here is my analysis.\n```json\n" + json.dumps(REFLECTION) + "\n```"
    if stage == "explore":
        k = history_steps(messages)
        action = SEED_ACTIONS[k % len(SEED_ACTIONS)]
        return f"The goal is to practise writes, so I take step {k + 1}.\n<action>\n{action}\n</action>"
    if stage == "abstract":
        runs = run_actions(messages)
        first = [a for a, ok in runs[0] if ok]
        return json.dumps(
            {
                "tasks": [
                    {
                        "description": "Recolour and reassign an item, dropping its size.",
                        "query": "Make the colour green, set the owner to bob and remove the size entry.",
                        "reference_actions": [a for a in first if '"set"' in a or '"delete"' in a],
                        "completion_criterion": "colour is green, owner is bob, no size key",
                    },
                    {
                        "description": "Check the colour, then recolour.",
                        "query": "Tell me the colour, then change it to green and make bob the owner.",
                        "reference_actions": first[:3],
                        "completion_criterion": "colour green and owner bob",
                    },
                ]
            }
        )
    if stage == "judge":
        return "Success: true\nReason: the calls match the reference."
    raise AssertionError(f"unexpected stage {stage}")
