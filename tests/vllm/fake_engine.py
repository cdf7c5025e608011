"""``FakeLLM``: a stand-in for ``vllm.LLM`` -- the CUDA engine -- and for nothing else.

It takes vLLM's real ``TokensPrompt`` and ``SamplingParams`` and returns vLLM's real
``RequestOutput`` / ``CompletionOutput`` / ``Logprob`` objects, so the adapter is exercised
against vLLM's own types. The sampling is done by a private copy of the checkpoint in
transformers (as vLLM holds its own copy of the weights), with log-probabilities from the raw
logits, as ``logprobs_mode="raw_logprobs"`` gives. The weight-update surfaces the adapter uses
(``apply_model``, ``collective_rpc``, the attribute chain to the worker's model, ``sleep`` /
``wake_up``, ``reset_prefix_cache``) behave as in vLLM 0.33 and record their calls, and each
can be broken on purpose to test the fallbacks.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any, Callable, Iterable

import torch


class VllmLikeModel:
    """What vLLM's workers hold: a model with ``load_weights(weights)`` taking HF names."""

    def __init__(self, hf_model: Any, *, ignore_loads: bool = False) -> None:
        self.hf = hf_model
        self.ignore_loads = ignore_loads
        self.loads = 0

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        params = dict(self.hf.named_parameters())
        loaded = set()
        for name, w in weights:
            if name not in params:
                raise KeyError(f"unexpected weight {name}")
            if not self.ignore_loads:
                with torch.no_grad():
                    params[name].copy_(w.to(params[name].dtype))
            loaded.add(name)
        self.loads += 1
        return loaded


class FakeLLM:
    def __init__(self, model_dir: str, types: tuple[Any, ...], *, broken: Iterable[str] = (), ignore_loads: bool = False) -> None:
        from transformers import AutoModelForCausalLM

        self.SamplingParams, self.TokensPrompt, self.RequestOutput, self.CompletionOutput, self.Logprob, _ = types
        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.model = VllmLikeModel(hf, ignore_loads=ignore_loads)
        self.broken = set(broken)
        self.calls: list[tuple[str, Any]] = []
        self.awake = True
        self.sleep_levels: list[int] = []
        self.prefix_resets = 0
        self._ids = itertools.count()
        self._gen = torch.Generator().manual_seed(0)
        worker = SimpleNamespace(model_runner=SimpleNamespace(model=self.model))
        if "direct" in self.broken:
            worker = SimpleNamespace()
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(worker=worker)))
        self._worker = SimpleNamespace(model_runner=SimpleNamespace(model=self.model))

    # ------------------------------------------------------------------ weight surfaces
    def apply_model(self, func: Callable[[Any], Any]) -> list[Any]:
        self.calls.append(("apply_model", None))
        if "apply_model" in self.broken:
            raise RuntimeError("apply_model broken on purpose")
        return [func(self.model)]

    def collective_rpc(self, method: Any, timeout: float | None = None, args: tuple = (), kwargs: dict | None = None) -> list[Any]:
        self.calls.append(("collective_rpc", method))
        if "collective_rpc" in self.broken:
            raise RuntimeError("collective_rpc broken on purpose")
        return [method(self._worker, *args, **(kwargs or {}))]

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self.prefix_resets += 1
        return True

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        assert self.awake, "sleep() on a sleeping engine"
        self.sleep_levels.append(level)
        self.awake = False
        if level == 2:  # level 2 discards the weights: make that visible
            with torch.no_grad():
                for p in self.model.hf.parameters():
                    p.normal_()

    def wake_up(self, tags: list[str] | None = None) -> bool:
        self.calls.append(("wake_up", tuple(tags or ())))
        self.awake = True
        return True

    # ------------------------------------------------------------------ generation
    def generate(self, prompts: Any, sampling_params: Any, *, use_tqdm: bool = True) -> list[Any]:
        assert self.awake, "generate() on a sleeping engine"
        if not isinstance(prompts, list):
            prompts = [prompts]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        assert len(params) == len(prompts)
        self.calls.append(("generate", [(list(p["prompt_token_ids"]), sp.n) for p, sp in zip(prompts, params)]))
        return [self._one(p["prompt_token_ids"], sp) for p, sp in zip(prompts, params)]

    def _logprobs(self, ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            logits = self.model.hf(input_ids=torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, dim=-1)

    def _one(self, prompt: list[int], sp: Any) -> Any:
        prompt = list(prompt)
        prompt_lp = None
        if sp.prompt_logprobs is not None:
            lp = self._logprobs(prompt)
            prompt_lp = [None] + [
                {tok: self.Logprob(logprob=float(lp[i - 1, tok]), rank=1)} for i, tok in enumerate(prompt) if i > 0
            ]
        outs = []
        stops = set(sp.stop_token_ids or [])
        for j in range(sp.n):
            seq = list(prompt)
            toks: list[int] = []
            lps: list[dict[int, Any]] = []
            finish = "length"
            for _ in range(sp.max_tokens):
                row = self._logprobs(seq)[-1]
                if sp.temperature == 0:
                    tok = int(row.argmax())
                else:
                    probs = torch.softmax(row / sp.temperature, dim=-1)
                    tok = int(torch.multinomial(probs, 1, generator=self._gen))
                toks.append(tok)
                lps.append({tok: self.Logprob(logprob=float(row[tok]), rank=1)})
                seq.append(tok)
                if tok in stops:
                    finish = "stop"
                    break
            outs.append(
                self.CompletionOutput(
                    index=j, text="", token_ids=toks, cumulative_logprob=None,
                    logprobs=lps if sp.logprobs is not None else None, finish_reason=finish,
                )
            )
        return self.RequestOutput(
            request_id=str(next(self._ids)), prompt=None, prompt_token_ids=prompt,
            prompt_logprobs=prompt_lp, outputs=outs, finished=True,
        )
