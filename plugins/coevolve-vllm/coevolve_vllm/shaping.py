"""Request shaping and output conversion: the pure logic between the core and vLLM.

Nothing here imports vLLM or torch, so it is tested on any machine. The functions accept
vLLM's own output objects (``RequestOutput`` / ``CompletionOutput`` / ``Logprob`` /
``FlatLogprobs``) by duck typing, and the JSON of vLLM's OpenAI-compatible completions
endpoint for server mode.

Why duplicates are merged: the core's rollout asks for one completion per prompt and passes
the K members of a group as K identical prompts (on the first turn they are identical; later
turns diverge). vLLM samples ``n`` completions of one prompt with a single prefill and shared
KV blocks, so identical prompts are grouped into one request with ``n`` equal to their count.
Greedy decoding is deterministic and vLLM refuses ``n > 1`` with temperature 0, so in greedy
mode one request is sent per distinct prompt and its completion is copied to the duplicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from coevolve_sdk import Generation

__all__ = [
    "PromptGroup",
    "Sample",
    "plan_requests",
    "sampling_kwargs",
    "samples_from_request_output",
    "samples_from_completion_choices",
    "to_generations",
    "completions_payload",
    "prompt_logprobs_from_request_output",
    "prompt_logprobs_from_completion_json",
]


@dataclass
class PromptGroup:
    """One vLLM request: a distinct prompt and the positions (in the core's batch) it serves."""

    token_ids: list[int]
    positions: list[int] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.positions)


@dataclass
class Sample:
    """One sampled completion as the engine returned it, before conversion."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None = None


def plan_requests(prompts: Sequence[Sequence[int]], *, merge_duplicates: bool = True) -> list[PromptGroup]:
    """Group identical prompts, keeping the order of first appearance.

    Every position of ``prompts`` ends up in exactly one group; a group's ``n`` is the number
    of completions asked for that prompt.
    """
    if any(len(p) == 0 for p in prompts):
        raise ValueError("generate() got an empty prompt; every prompt needs at least one token")
    groups: list[PromptGroup] = []
    index: dict[tuple[int, ...], int] = {}
    for pos, p in enumerate(prompts):
        key = tuple(int(t) for t in p)
        if merge_duplicates and key in index:
            groups[index[key]].positions.append(pos)
            continue
        index[key] = len(groups)
        groups.append(PromptGroup(list(key), [pos]))
    return groups


def sampling_kwargs(
    *,
    n: int,
    max_new_tokens: int,
    temperature: float,
    greedy: bool,
    stop_token_ids: Sequence[int],
    seed: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request.

    ``logprobs=0`` asks for the sampled token's log-probability only; with the engine's
    default ``logprobs_mode="raw_logprobs"`` it is computed from the raw logits, before
    temperature, top-k or top-p, which is what the core's ``Generation.logprobs`` promises.
    Detokenisation is left to the policy's own tokenizer (``detokenize=False``) so that the
    text the environment parses is the same whichever engine sampled it.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    greedy = greedy or temperature <= 0.0
    if greedy and n != 1:
        raise ValueError("greedy requests must have n == 1 (vLLM refuses n > 1 at temperature 0)")
    kw: dict[str, Any] = {
        "n": n,
        "max_tokens": int(max_new_tokens),
        "temperature": 0.0 if greedy else float(temperature),
        "top_p": 1.0,
        "top_k": 0,
        "logprobs": 0,
        "stop_token_ids": sorted({int(t) for t in stop_token_ids}),
        "skip_special_tokens": False,
        "detokenize": False,
    }
    if seed is not None:
        kw["seed"] = int(seed)
    return kw


def _sampled_logprob(position: Any, token_id: int) -> float:
    """The sampled token's logprob at one position: a ``dict[int, Logprob]`` (or a dict of
    floats) that must contain ``token_id``."""
    if position is None:
        raise ValueError(f"the engine returned no logprobs for sampled token {token_id}; was logprobs=0 set?")
    entry = position.get(token_id) if hasattr(position, "get") else None
    if entry is None:
        raise ValueError(f"sampled token {token_id} is missing from the engine's logprobs {dict(position)!r}")
    value = getattr(entry, "logprob", entry)
    return float(value)


def _logprob_list(logprobs: Any, token_ids: Sequence[int]) -> list[float]:
    """Sampled-token logprobs from vLLM's ``list[dict[int, Logprob]]`` or ``FlatLogprobs``."""
    if logprobs is None:
        raise ValueError("the engine returned no logprobs; the vllm policy needs SamplingParams(logprobs=0)")
    if len(logprobs) != len(token_ids):
        raise ValueError(f"the engine returned {len(logprobs)} logprob positions for {len(token_ids)} tokens")
    starts = getattr(logprobs, "start_indices", None)
    if starts is not None:  # FlatLogprobs: read the flat arrays without building dicts
        ends, ids, values = logprobs.end_indices, logprobs.token_ids, logprobs.logprobs
        out = []
        for i, tok in enumerate(token_ids):
            for j in range(starts[i], ends[i]):
                if ids[j] == tok:
                    out.append(float(values[j]))
                    break
            else:
                raise ValueError(f"sampled token {tok} is missing from the engine's logprobs at position {i}")
        return out
    return [_sampled_logprob(pos, int(tok)) for pos, tok in zip(logprobs, token_ids)]


def samples_from_request_output(output: Any) -> list[Sample]:
    """Samples of one ``vllm.RequestOutput`` (its ``outputs`` are the n completions)."""
    samples = []
    for comp in sorted(output.outputs, key=lambda c: getattr(c, "index", 0)):
        ids = [int(t) for t in comp.token_ids]
        samples.append(Sample(ids, _logprob_list(comp.logprobs, ids), getattr(comp, "finish_reason", None)))
    return samples


def samples_from_completion_choices(choices: list[dict[str, Any]], n: int, n_prompts: int) -> list[list[Sample]]:
    """Samples from the JSON ``choices`` of vLLM's ``/v1/completions`` for a batch of prompts.

    vLLM lists the choices prompt by prompt, ``n`` per prompt (``index`` runs over the whole
    response). ``token_ids`` needs ``return_token_ids: true`` in the request, and
    ``logprobs.token_logprobs`` needs ``logprobs: 0``.
    """
    if len(choices) != n * n_prompts:
        raise ValueError(f"expected {n * n_prompts} choices ({n_prompts} prompts x n={n}), got {len(choices)}")
    ordered = sorted(choices, key=lambda c: c.get("index", 0))
    out: list[list[Sample]] = []
    for p in range(n_prompts):
        group = []
        for c in ordered[p * n : (p + 1) * n]:
            ids = c.get("token_ids")
            if ids is None:
                raise ValueError("completion choice has no token_ids; send return_token_ids: true")
            lp = (c.get("logprobs") or {}).get("token_logprobs")
            if lp is None or len(lp) != len(ids) or any(v is None for v in lp):
                raise ValueError("completion choice has no per-token logprobs; send logprobs: 0")
            group.append(Sample([int(t) for t in ids], [float(v) for v in lp], c.get("finish_reason")))
        out.append(group)
    return out


def to_generations(
    groups: list[PromptGroup],
    samples: list[list[Sample]],
    *,
    stop_token_ids: Sequence[int],
    decode: Callable[[list[int]], str],
    replicate: bool = False,
) -> list[Generation]:
    """Scatter each group's samples back to the positions of the core's batch.

    ``finished`` is true when the last token is a stop token (the end-of-turn token or eos),
    as the core expects: it then needs no end-of-turn appended. The text excludes that token.
    With ``replicate`` (greedy), a group holds one sample that every position receives.
    """
    if len(samples) != len(groups):
        raise ValueError(f"{len(groups)} requests but {len(samples)} outputs")
    stops = {int(t) for t in stop_token_ids}
    total = sum(g.n for g in groups)
    out: list[Generation | None] = [None] * total
    for g, ss in zip(groups, samples):
        want = 1 if replicate else g.n
        if len(ss) != want:
            raise ValueError(f"a request asked for {want} completions and got {len(ss)}")
        for k, pos in enumerate(g.positions):
            s = ss[0 if replicate else k]
            if len(s.logprobs) != len(s.token_ids):
                raise ValueError("a sample has a different number of logprobs and tokens")
            bad = [v for v in s.logprobs if math.isnan(v) or v > 1e-4]
            if bad:
                raise ValueError(f"the engine returned invalid log-probabilities {bad[:3]}")
            finished = bool(s.token_ids) and s.token_ids[-1] in stops
            text_ids = s.token_ids[:-1] if finished else s.token_ids
            out[pos] = Generation(
                token_ids=list(s.token_ids), logprobs=list(s.logprobs), text=decode(list(text_ids)), finished=finished
            )
    missing = [i for i, g in enumerate(out) if g is None]
    if missing:
        raise ValueError(f"positions {missing[:5]} received no completion")
    return [g for g in out if g is not None]


def completions_payload(
    model: str,
    group_prompts: list[list[int]],
    kw: dict[str, Any],
) -> dict[str, Any]:
    """Body of a ``POST /v1/completions`` for prompts that all share the same sampling settings."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": group_prompts,
        "n": kw["n"],
        "max_tokens": kw["max_tokens"],
        "temperature": kw["temperature"],
        "top_p": kw["top_p"],
        "top_k": kw["top_k"],
        "logprobs": 0,
        "stop_token_ids": kw["stop_token_ids"],
        "skip_special_tokens": False,
        "return_token_ids": True,
        "stream": False,
    }
    if "seed" in kw:
        body["seed"] = kw["seed"]
    return body


def prompt_logprobs_from_request_output(output: Any) -> list[float]:
    """Log-probabilities of prompt tokens 1..L-1 from ``RequestOutput.prompt_logprobs``
    (requested with ``prompt_logprobs=0``; position 0 has none)."""
    ids = [int(t) for t in output.prompt_token_ids]
    plp = output.prompt_logprobs
    if plp is None or len(plp) != len(ids):
        raise ValueError("the engine returned no prompt logprobs; request prompt_logprobs=0")
    return _logprob_list(plp[1:], ids[1:])


def prompt_logprobs_from_completion_json(choice: dict[str, Any], prompt_ids: Sequence[int]) -> list[float]:
    """The same, from a ``/v1/completions`` choice (``prompt_logprobs`` keys are token ids as strings)."""
    plp = choice.get("prompt_logprobs")
    if plp is None or len(plp) != len(prompt_ids):
        raise ValueError("the server returned no prompt logprobs; request prompt_logprobs: 0")
    out = []
    for pos, tok in zip(plp[1:], prompt_ids[1:]):
        entry = (pos or {}).get(str(int(tok)))
        if entry is None:
            raise ValueError(f"prompt token {tok} missing from the server's prompt logprobs")
        out.append(float(entry["logprob"] if isinstance(entry, dict) else entry))
    return out
