"""An in-process litellm provider: ``coevolve-hf/<model>`` answered by a causal LM in this process.

Why in process and not a llama.cpp server: ``llama-cpp-python`` has no binary wheel for Linux
(its source build takes about twenty minutes on two cores), and a server is one more process to
start, wait for and stop. litellm's ``CustomLLM`` interface (``litellm.custom_provider_map``)
lets the unchanged LiteLLM teacher (retries, budget, parsing, stages) talk to any model that
transformers loads, with no network and no compilation: the same path a remote model takes,
from ``litellm.completion`` on.

Use it by listing this module in a run config's ``plugins:`` and naming the model in the
teacher's options::

    plugins: [coevolve_grpo.litellm_local]
    teacher:
      name: litellm
      options: {model: coevolve-hf/smollm2-135m, max_tokens: 192, timeout: 300}

``<model>`` is anything the ``hf`` policy accepts: a known name (``coevolve models list``;
converted on first use), a local folder or a hub id. Each model is loaded once per process
(float32 on the CPU, bfloat16 on a GPU) and requests are answered one at a time (a lock), so several evolution
threads queue instead of multiplying memory. The request's ``timeout`` bounds the generation
time too (transformers' ``max_time``), so a slow CPU cannot hang a teacher stage: a reply cut
by time is returned as far as it got and the stage's parser decides what it is worth.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

__all__ = ["PROVIDER", "LocalHFChat", "register", "counts"]

PROVIDER = "coevolve-hf"

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's price list

_models: dict[str, tuple[Any, Any]] = {}
_lock = threading.Lock()
#: Requests answered per model and how their generation ended (``stop``: end of turn; ``length``:
#: max_tokens; ``time``: the timeout) -- what a run's log and the docs report.
counts: dict[str, dict[str, int]] = {}


def _load(model: str) -> tuple[Any, Any]:
    if model not in _models:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .models import resolve_model

        path = resolve_model(model)
        tok = AutoTokenizer.from_pretrained(path)
        cuda = torch.cuda.is_available()
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if cuda else torch.float32)
        lm.to("cuda" if cuda else "cpu").eval()
        _models[model] = (lm, tok)
    return _models[model]


def _generate(model: str, messages: list[dict[str, Any]], params: dict[str, Any], timeout: float | None) -> tuple[str, int, int, str]:
    import torch

    lm, tok = _load(model)
    plain = [{"role": str(m.get("role", "user")), "content": str(m.get("content") or "")} for m in messages]
    ids = tok.apply_chat_template(plain, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    prompt = ids["input_ids"]
    max_new = int(params.get("max_tokens") or params.get("max_completion_tokens") or 256)
    limit = int(getattr(lm.config, "max_position_embeddings", 8192) or 8192)
    if prompt.shape[1] + max_new > limit:  # keep the end of an over-long prompt (the question is last)
        keep = max(16, limit - max_new)
        ids = {k: v[:, -keep:] for k, v in ids.items()}
        prompt = ids["input_ids"]
    temperature = float(params.get("temperature", 0.7) or 0.0)
    kw: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": tok.pad_token_id or tok.eos_token_id}
    if temperature > 0:
        kw.update(do_sample=True, temperature=temperature, top_p=float(params.get("top_p", 1.0) or 1.0))
    else:
        kw.update(do_sample=False)
    if timeout:
        kw["max_time"] = float(timeout) * 0.9  # leave room to return before the caller gives up
    ids = {k: v.to(lm.device) for k, v in ids.items()}
    t0 = time.monotonic()
    with torch.inference_mode():
        out = lm.generate(**ids, **kw)
    new = out[0, prompt.shape[1]:].tolist()
    eos = {tok.eos_token_id, *([tok.convert_tokens_to_ids("<|im_end|>")] if "<|im_end|>" in tok.get_vocab() else [])}
    if new and new[-1] in eos:
        how = "stop"
    elif len(new) >= max_new:
        how = "length"
    else:
        how = "time" if timeout and time.monotonic() - t0 >= float(timeout) * 0.9 else "stop"
    return tok.decode(new, skip_special_tokens=True), int(prompt.shape[1]), len(new), how


def _respond(model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any], timeout: Any) -> Any:
    from litellm import ModelResponse
    from litellm.types.utils import Choices, Message, Usage

    t = None
    try:
        t = float(timeout) if timeout is not None else None
    except (TypeError, ValueError):
        t = None
    with _lock:
        text, pt, ct, how = _generate(model, messages, dict(optional_params or {}), t)
        c = counts.setdefault(model, {"requests": 0, "stop": 0, "length": 0, "time": 0, "empty": 0})
        c["requests"] += 1
        c[how] += 1
        c["empty"] += int(not text.strip())
    resp = ModelResponse(model=f"{PROVIDER}/{model}")
    resp.choices = [Choices(index=0, message=Message(role="assistant", content=text), finish_reason="stop" if how == "stop" else "length")]
    resp.usage = Usage(prompt_tokens=pt, completion_tokens=ct, total_tokens=pt + ct)
    return resp


def _handler_class() -> type:
    from litellm import CustomLLM

    class LocalHFChat(CustomLLM):
        """litellm's custom-provider interface over :func:`_respond`."""

        def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key,  # type: ignore[override]
                       logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None, headers=None,
                       timeout=None, client=None, *args, **kwargs):
            return _respond(model, messages, optional_params, timeout)

        async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key,  # type: ignore[override]
                              logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None, headers=None,
                              timeout=None, client=None, *args, **kwargs):
            import asyncio

            return await asyncio.to_thread(_respond, model, messages, optional_params, timeout)

    return LocalHFChat


def LocalHFChat() -> Any:  # noqa: N802 -- a factory named like the class it builds
    """A new handler instance (litellm is imported here, not when this module is imported)."""
    return _handler_class()()


def register() -> None:
    """Add the ``coevolve-hf`` provider to ``litellm.custom_provider_map`` (once)."""
    import litellm

    if not any(p.get("provider") == PROVIDER for p in litellm.custom_provider_map):
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": PROVIDER, "custom_handler": LocalHFChat()}]


register()
