"""A litellm provider ``faulty/`` for `coevolve run` subprocess tests: imported as a plugin module
(config ``plugins:``), it registers a CustomLLM that cycles through a remote model's failure
modes — rate limits, timeouts, malformed JSON, empty replies, impossible actions — between
good answers. Only the remote model is replaced; everything else is litellm's real code path."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm import CustomLLM, ModelResponse  # noqa: E402
from litellm.types.utils import Choices, Message, Usage  # noqa: E402

from coevolve_sdk.env.actions import format_tool_call  # noqa: E402

GOOD = [
    format_tool_call("set", {"key": "figs", "value": 3}),
    format_tool_call("increment", {"key": "figs", "amount": 2}),
    format_tool_call("set", {"key": "limes", "value": 7}),
    format_tool_call("get", {"key": "figs"}),
]
_faults = itertools.cycle(["ok", "ok", "rate", "ok", "ok", "garbage", "ok", "ok", "timeout", "ok", "ok", "empty", "ok", "impossible"])
_lock = threading.Lock()


def _reply(stage: str, user: str) -> str:
    with _lock:
        fault = next(_faults)
    if fault == "rate":
        raise litellm.RateLimitError("429: slow down", llm_provider="faulty", model="x")
    if fault == "timeout":
        raise litellm.Timeout("request timed out", model="x", llm_provider="faulty")
    if fault == "garbage":
        return "{not json at all"
    if fault == "empty":
        return ""
    if stage == "reflect":
        return json.dumps({"summary": "The agent skipped the write.", "failure_cause": "no set call",
                           "instability_pattern": "reads then stops", "focus_pattern": ["set"],
                           "exploration_objectives": ["write values"], "do_not_repeat": ["stopping early"]})
    if stage == "explore":
        k = len(re.findall(r"^Action: ", user, flags=re.MULTILINE))
        return f"<action>\n{GOOD[k % len(GOOD)]}\n</action>"
    if stage == "abstract":
        if fault == "impossible":
            acts = [format_tool_call("delete", {"key": "no-such-key"})] * 3
        else:
            acts = GOOD
        return json.dumps({"tasks": [{"description": "store fruit counts", "query": "Set figs to 3, add 2 to figs, set limes to 7 and tell me figs.",
                                      "reference_actions": acts, "completion_criterion": "figs 5, limes 7"}]})
    return "Success: true\nReason: fine."


class Faulty(CustomLLM):
    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None, *args, **kwargs):  # type: ignore[override]
        stage = ((litellm_params or {}).get("metadata") or {}).get("coevolve_stage", "?")
        text = _reply(stage, messages[-1]["content"])
        resp = ModelResponse(model=model)
        resp.choices = [Choices(index=0, message=Message(role="assistant", content=text), finish_reason="stop")]
        resp.usage = Usage(prompt_tokens=50, completion_tokens=20, total_tokens=70)
        return resp


litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": "faulty", "custom_handler": Faulty()}]
