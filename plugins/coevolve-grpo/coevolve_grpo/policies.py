"""Policies backed by Hugging Face transformers: ``hf`` (any causal LM) and ``tiny`` (offline).

Both render conversations with the tokenizer's chat template and sample with their own
KV-cached decoding loop rather than ``model.generate``: the loop records, for every sampled
token, its log-probability under the *raw* logits (temperature 1, no top-k/top-p), which is
what the importance ratio of GRPO needs, while keeping only one ``[batch, vocab]`` slice of
logits alive (``generate(output_logits=True)`` keeps all of them, which does not fit for a
150k vocabulary). It is also leaner per step than ``generate``.

torch and transformers are imported when a policy is built, never at module import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from coevolve_sdk import (
    CheckpointError,
    CheckpointMismatch,
    Generation,
    RunContext,
    TrainablePolicy,
)

__all__ = ["HFPolicy", "TinyPolicy", "HFPolicyOptions", "TinyPolicyOptions", "cut_at_stop_texts"]

_DTYPES = Literal["auto", "float32", "bfloat16", "float16"]

# Conversation used as a prefix when rendering follow-up messages: the part of the rendering
# after the prefix's last end-of-turn token is exactly what the follow-up adds.
_PREFIX = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]


REUSE_TURN_CACHE_DOC = (
    "Keep each conversation's key/value cache from one agent turn to the next, so that a turn computes only the "
    "tokens added since the last (the tool result and the next prompt), not the whole conversation again; dropped "
    "whenever the weights change. false: every turn from scratch. (The vllm policy leaves this to vLLM's own "
    "prefix caching.)")


class HFPolicyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Hub id or local path of a causal LM (AutoModelForCausalLM), or a name from "
                                   "`coevolve models list` (e.g. smollm2-135m: converted into the model cache on first use).")
    model_cache: str | None = Field(None, description="Folder of converted named models; default $COEVOLVE_MODEL_CACHE or ~/.cache/coevolve/models.")
    tokenizer: str | None = Field(None, description="Hub id or path of the tokenizer; defaults to `model`.")
    chat_template: str | None = Field(
        None, description="Jinja chat template (or a path to a .jinja file) replacing the tokenizer's own."
    )
    dtype: _DTYPES = Field("auto", description="Weights dtype; auto = bfloat16 on a GPU that supports it, else float32.")
    device: str = Field("auto", description="auto = cuda if available, else cpu. Under the grpo algorithm Accelerate decides.")
    trust_remote_code: bool = False
    attn_implementation: str | None = Field(None, description="e.g. sdpa, flash_attention_2; None = transformers' default.")
    max_context: int = Field(4096, ge=16, description="Longest token sequence the policy is asked to handle.")
    max_batch_size: int | None = Field(None, ge=1, description="Prompts decoded together at most; None = all at once.")
    reuse_turn_cache: bool = Field(True, description=REUSE_TURN_CACHE_DOC)
    seed: int | None = Field(None, description="Seed torch's RNG once when the policy is built; default: the run seed.")
    tools_in_prompt: Literal["template", "system"] = Field(
        "template", description="template: pass the tools to the chat template (tools=); system: write the tool list, how to "
                                "call a tool and `tool_example` into the system message, for templates that drop tools= (SmolLM2).")
    tool_instructions: str | None = Field(
        None, description="With tools_in_prompt=system: the text before the example; {tools} becomes one JSON line per tool. "
                          "Default: a short instruction to answer with one <tool_call> block.")
    tool_example: str | None = Field(
        None, description="With tools_in_prompt=system: 'auto' = a worked example replayed from the environment's first "
                          "training task with a tool call; any other text is used as the example; None = no example.")
    stop_texts: list[str] = Field(
        default_factory=list, description="End a completion as soon as its text contains one of these (e.g. </tool_call>, so "
                                          "a small model does not ramble on after its call); the end-of-turn token is then "
                                          "added by the rollout loop, untrained.")


class TinyPolicyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hidden_size: int = Field(64, ge=16, le=1024, description="Width of the Qwen3 model (64-128 for CPU tests).")
    layers: int = Field(2, ge=1, le=24)
    heads: int = Field(4, ge=1)
    kv_heads: int = Field(2, ge=1)
    intermediate_size: int | None = Field(None, ge=16, description="MLP width; default 4 x hidden_size.")
    vocab_size: int = Field(1024, ge=300, le=65536, description="Target size of the trained BPE vocabulary.")
    sample_actions: int = Field(32, ge=0, description="Random valid actions drawn from the environment for the tokenizer corpus.")
    extra_texts: list[str] = Field(default_factory=list, description="More texts for the tokenizer corpus.")
    init_from: str | None = Field(None, description="Directory of a saved tiny policy (save_pretrained) to start from.")
    max_context: int = Field(2048, ge=16)
    max_batch_size: int | None = Field(None, ge=1)
    reuse_turn_cache: bool = Field(True, description=REUSE_TURN_CACHE_DOC)
    seed: int | None = Field(
        None, description="Seed of the weight initialisation and of the tokenizer corpus's random actions (identical on every "
                          "process); default: the run seed, so that runs with different seeds start from different models.")
    device: str = Field("auto")


class HFPolicy(TrainablePolicy):
    """Any causal LM from the hub or a local path, with its tokenizer and chat template.

    A :class:`~coevolve_sdk.training.policy.TrainablePolicy`: ``module`` (also ``model``, the
    ``PreTrainedModel``) is what the algorithm trains; it may wrap it for distributed training
    and hand back, through ``set_decoding_module``, the bare module (which shares the wrapper's
    parameters) or a full-weight copy it keeps in step (FSDP). ``tokenizer`` is the Hugging
    Face tokenizer.
    """

    name: ClassVar[str] = "hf"
    Options: ClassVar[type[BaseModel]] = HFPolicyOptions

    def __init__(self, options: BaseModel | None = None, context: RunContext | None = None) -> None:
        self.options = options if options is not None else self.Options()
        self.context = context
        self.max_context = self.options.max_context
        self._model: Any = None
        self._tokenizer: Any = None
        self._build()

    # ------------------------------------------------------------------ construction
    def _build(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        o = self.options
        seed = o.seed if o.seed is not None else (self.context.seed if self.context is not None else None)
        if seed is not None:  # the run's seed unless the option overrides it
            torch.manual_seed(seed)
        from .models import resolve_model

        log = self.context.log if self.context is not None else None
        model_path = resolve_model(o.model, o.model_cache, log=log)
        tok_path = resolve_model(o.tokenizer, o.model_cache, log=log) if o.tokenizer else model_path
        tok = AutoTokenizer.from_pretrained(tok_path, trust_remote_code=o.trust_remote_code)
        if o.chat_template:
            tpl = o.chat_template
            if not ("{%" in tpl or "{{" in tpl) and Path(tpl).exists():
                tpl = Path(tpl).read_text(encoding="utf-8")
            tok.chat_template = tpl
        if not getattr(tok, "chat_template", None):
            raise ValueError(
                f"tokenizer of '{o.tokenizer or o.model}' has no chat template; pass options.chat_template "
                "(a Jinja string or a .jinja file)"
            )
        kwargs: dict[str, Any] = {"trust_remote_code": o.trust_remote_code, "dtype": _resolve_dtype(o.dtype)}
        if o.attn_implementation:
            kwargs["attn_implementation"] = o.attn_implementation
        model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
        self._install(model, tok)

    def _install(self, model: Any, tok: Any) -> None:
        import torch

        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        device = self.options.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._model = model.to(device)
        self._tokenizer = tok
        self._prompt_cache: dict[str, list[int]] = {}
        self._turn_caches: dict[tuple[int, ...], list[tuple[Any, Any]]] = {}
        self._turn_caches_version: tuple[tuple[int, int], ...] | None = None
        eos = _end_of_turn_id(tok)
        self.eos_token_id = eos
        self._stop_ids = sorted({eos, *([tok.eos_token_id] if tok.eos_token_id is not None else [])})
        self._logits_to_keep = _accepts(model, "logits_to_keep")

    @property
    def model(self) -> Any:
        """The module with the full weights (decoding runs through it); same as ``module``."""
        return self._model

    @property
    def module(self) -> Any:
        return self.model

    def set_decoding_module(self, module: Any) -> None:
        self.model  # build a lazy policy first, so that the handed-over module is not replaced
        self._model = module

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def pad_token_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def stop_token_ids(self) -> list[int]:
        """Token ids that end a completion: the end-of-turn token and the tokenizer's eos."""
        self.model  # a lazy policy learns its tokens when it is built
        return list(self._stop_ids)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ rendering
    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *, add_generation_prompt: bool = True) -> str:
        """The chat template's text for a conversation (what ``encode_prompt`` tokenises)."""
        return self.tokenizer.apply_chat_template(
            _plain(messages), tools=tools or None, add_generation_prompt=add_generation_prompt, tokenize=False
        )

    def encode_text(self, text: str) -> list[int]:
        """Token ids of ``text`` as the model would emit it (no special tokens added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        # The K episodes of a task open with the same messages: render and tokenise once.
        key = json.dumps([messages, tools], sort_keys=True, default=str)
        hit = self._prompt_cache.get(key)
        if hit is None:
            if getattr(self.options, "tools_in_prompt", "template") == "system":
                messages, tools = self._tools_into_messages(messages, tools), []
            hit = self.encode_text(self.render(messages, tools, add_generation_prompt=True))
            if len(self._prompt_cache) >= 1024:
                self._prompt_cache.pop(next(iter(self._prompt_cache)))
            self._prompt_cache[key] = hit
        return list(hit)

    def _tools_into_messages(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The opening messages with the tools, the call format and the worked example in the
        system message (see :mod:`coevolve_grpo.toolprompt`)."""
        from .toolprompt import (
            DEFAULT_INSTRUCTIONS,
            with_tools_in_system,
            worked_example,
        )

        o = self.options
        if not hasattr(self, "_example"):
            example = o.tool_example
            if example == "auto":
                example = None
                if self.context is not None and self.context.make_env is not None:
                    env = self.context.new_env()
                    try:
                        example = worked_example(env)
                    finally:
                        try:
                            env.close()
                        except Exception:
                            pass
                if example is None and self.context is not None:
                    self.context.log("hf policy: tool_example=auto found no training task with a tool call; no example in the prompt")
            self._example = example
        return with_tools_in_system(messages, tools, instructions=o.tool_instructions or DEFAULT_INSTRUCTIONS, example=self._example)

    def followup_text(self, messages: list[dict[str, Any]]) -> str:
        """Text the template adds after an assistant turn's end-of-turn token for ``messages``,
        up to and including the next assistant generation prompt."""
        eos = self.tokenizer.convert_ids_to_tokens(self.eos_token_id)
        before = self.render(_PREFIX, add_generation_prompt=False)
        after = self.render(_PREFIX + _plain(messages), add_generation_prompt=True)
        cut = before.rfind(eos)
        if cut < 0 or not after.startswith(before[: cut + len(eos)]):
            raise ValueError(
                "this chat template is not prefix-preserving (rendering more messages changes the text of earlier "
                "ones), so follow-up turns cannot be appended token by token; pass a training chat template"
            )
        return after[cut + len(eos) :]

    def encode_followup(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.encode_text(self.followup_text(messages))

    def encode_completion(self, text: str) -> list[int]:
        """Ids of an assistant turn's content followed by the end-of-turn token (warm start)."""
        return self.encode_text(text) + [self.eos_token_id]

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)

    # ------------------------------------------------------------------ sampling
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
    ) -> list[Generation]:
        out: list[Generation] = []
        step = self.options.max_batch_size or max(1, len(prompts))
        # the caches kept from the previous call are valid only for the weights they were computed with
        version = self._weights_version() if self.options.reuse_turn_cache else None
        kept = self._turn_caches if version is not None and version == self._turn_caches_version else {}
        fresh: dict[tuple[int, ...], list[tuple[Any, Any]]] = {}
        for i in range(0, len(prompts), step):
            out.extend(self._generate_batch(prompts[i : i + step], max_new_tokens, temperature, greedy,
                                            kept=kept, keep=fresh if version is not None else None))
        self._turn_caches, self._turn_caches_version = fresh, version
        return out

    def release_turn_caches(self) -> None:
        """Free the caches kept for the conversations' next turns (the rollout loop calls this
        when its episodes are over: a 135M-parameter model keeps about 46 kB a token)."""
        self._turn_caches, self._turn_caches_version = {}, None

    def before_update(self) -> None:
        """The weights are about to change: the kept caches would be stale."""
        self.release_turn_caches()
        super().before_update()

    def _weights_version(self) -> tuple[tuple[int, int], ...]:
        """Identity and in-place version counter of every parameter: an optimiser step, a
        ``load_state_dict`` or a swapped parameter changes it, also one made without
        ``before_update`` (a script that trains the module directly)."""
        return tuple((id(p), p._version) for p in self.model.parameters())

    @staticmethod
    def _longest_kept_prefix(prompt: list[int], kept: dict[tuple[int, ...], Any], lengths: list[int]) -> tuple[int, ...] | None:
        for n in lengths:  # longest first; a prefix must leave at least one token to compute
            if n < len(prompt):
                key = tuple(prompt[:n])
                if key in kept:
                    return key
        return None

    def _generate_batch(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float,
        greedy: bool,
        *,
        kept: dict[tuple[int, ...], list[tuple[Any, Any]]] | None = None,
        keep: dict[tuple[int, ...], list[tuple[Any, Any]]] | None = None,
    ) -> list[Generation]:
        """Decode ``prompts`` together. ``kept``: per-layer (keys, values) of token sequences the
        previous call computed; a prompt that extends one computes only its new tokens. ``keep``
        receives this call's own, keyed by the tokens each row fed the model (its prompt and
        every completion token but the last)."""
        import torch

        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("generate() got an empty prompt")
        model = self.model
        device = self.device
        greedy = greedy or temperature <= 0.0
        b = len(prompts)
        pad = self.tokenizer.pad_token_id
        lengths_kept = sorted({len(k) for k in kept}, reverse=True) if kept else []
        prefixes = [self._longest_kept_prefix(p, kept, lengths_kept) if kept else None for p in prompts]
        past_len = [len(k) if k is not None else 0 for k in prefixes]
        p_max = max(past_len)
        # Each row: [left padding | its kept prefix | padding | its new tokens]; the model sees the
        # prefix through the cache and computes only the new tokens (the padding is masked out)
        width = max(len(p) - n for p, n in zip(prompts, past_len))
        ids = torch.full((b, width), pad, dtype=torch.long)
        mask = torch.zeros((b, p_max + width), dtype=torch.long)
        positions = torch.zeros((b, width), dtype=torch.long)
        # Left padding: every row's last prompt token sits at the end. Every row's real tokens take
        # positions 0, 1, ... as in training (right-padded), which matters for models with absolute
        # position embeddings.
        for r, (p, n) in enumerate(zip(prompts, past_len)):
            new = p[n:]
            ids[r, width - len(new) :] = torch.tensor(new, dtype=torch.long)
            mask[r, p_max - n : p_max] = 1
            mask[r, p_max + width - len(new) :] = 1
            positions[r, width - len(new) :] = torch.arange(n, len(p))
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        past = None
        if p_max:
            from transformers.cache_utils import DynamicCache

            layers = []
            for li, (k0, v0) in enumerate(next(kept[k] for k in prefixes if k is not None)):
                k = k0.new_zeros((b, k0.shape[0], p_max, k0.shape[2]))
                v = v0.new_zeros((b, v0.shape[0], p_max, v0.shape[2]))
                for r, key in enumerate(prefixes):
                    if key is not None:
                        k[r, :, p_max - past_len[r] :] = kept[key][li][0]
                        v[r, :, p_max - past_len[r] :] = kept[key][li][1]
                layers.append((k.to(device), v.to(device)))
            past = DynamicCache(layers)
        stop = torch.tensor(self._stop_ids, device=device)
        new_tokens = torch.full((b, max_new_tokens), pad, dtype=torch.long, device=device)
        new_lp = torch.zeros((b, max_new_tokens), dtype=torch.float32, device=device)
        done = torch.zeros(b, dtype=torch.bool, device=device)
        lengths = torch.zeros(b, dtype=torch.long, device=device)
        stop_texts = list(getattr(self.options, "stop_texts", None) or [])
        # enough tokens to hold any stop text (a token holds at least one character)
        tail_len = max((len(x) for x in stop_texts), default=0) + 1
        cut = [False] * b
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                next_pos = torch.tensor([[len(p)] for p in prompts], dtype=torch.long, device=device)
                cache_kw = _cache_keyword(self.model)
                # Only the last position's logits are needed to start decoding.
                extra = {"logits_to_keep": 1} if self._logits_to_keep else {}
                if past is not None:
                    extra[cache_kw] = past
                res = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **extra)
                cache = getattr(res, cache_kw)
                if keep is not None and not _plain_dynamic_cache(cache):
                    keep = None  # sliding windows, quantised or static caches: every turn from scratch

                def keep_rows(which: Any) -> None:
                    """Store the cache of the rows ``which`` (positions in the current batch)."""
                    for i in which.tolist():
                        r = int(rows[i])
                        n = int(lengths[r])
                        fed = prompts[r] + new_tokens[r, : n - 1].tolist()
                        at = mask[i].nonzero().flatten()[: len(fed)]
                        keep[tuple(fed)] = [(lay.keys[i][:, at].clone(), lay.values[i][:, at].clone()) for lay in cache.layers]
                logits = res.logits[:, -1, :].float()
                # ``rows``: the original row of each row still decoded. A finished row costs as much
                # as a live one in every later forward pass, and in a batch of agent turns half the
                # row-steps were finished rows (the longest turn sets the pace), so finished rows
                # leave the batch, with their part of the cache, once they are an eighth of it.
                rows = torch.arange(b, device=device)
                can_drop = callable(getattr(cache, "batch_select_indices", None))
                for t in range(max_new_tokens):
                    logp = torch.log_softmax(logits, dim=-1)
                    if greedy:
                        tok = logits.argmax(dim=-1)
                    else:
                        probs = torch.softmax(logits / temperature, dim=-1) if temperature != 1.0 else logp.exp()
                        tok = torch.multinomial(probs, 1).squeeze(1)
                    live = ~done[rows]
                    tok = torch.where(live, tok, torch.full_like(tok, pad))
                    new_tokens[rows, t] = tok
                    new_lp[rows, t] = torch.where(live, logp.gather(1, tok[:, None]).squeeze(1), 0.0)
                    lengths[rows] += live.long()
                    hit = torch.isin(tok, stop) & live
                    if stop_texts:  # the row's text so far ends a completion (its last tokens decoded)
                        tails = new_tokens[rows, max(0, t + 1 - tail_len) : t + 1].cpu().tolist()
                        for i in (live & ~hit).nonzero().flatten().tolist():
                            if any(x in self.tokenizer.decode(tails[i], skip_special_tokens=False) for x in stop_texts):
                                hit[i] = True
                                cut[int(rows[i])] = True
                    done[rows] = done[rows] | hit
                    finished = done[rows]
                    if bool(finished.all()) or t == max_new_tokens - 1:
                        if keep is not None:
                            keep_rows(torch.arange(len(rows)))
                        break
                    n_finished = int(finished.sum())
                    if can_drop and n_finished and n_finished * 8 >= len(rows):
                        if keep is not None:
                            keep_rows(finished.nonzero().flatten())
                        stay = (~finished).nonzero().flatten()
                        cache.batch_select_indices(stay)
                        rows, tok, mask, next_pos = rows[stay], tok[stay], mask[stay], next_pos[stay]
                    mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype, device=device)], dim=1)
                    pos = next_pos + t
                    res = model(input_ids=tok[:, None], attention_mask=mask, position_ids=pos, use_cache=True, **{cache_kw: cache})
                    cache = getattr(res, cache_kw)
                    logits = res.logits[:, -1, :].float()
        finally:
            if was_training:
                model.train()
        toks = new_tokens.cpu().tolist()
        lps = new_lp.cpu().tolist()
        lens = lengths.cpu().tolist()
        stops = set(self._stop_ids)
        gens: list[Generation] = []
        for r in range(b):
            n = lens[r]
            seq = toks[r][:n]
            finished = bool(n > 0 and seq[-1] in stops and not cut[r])
            text_ids = seq[:-1] if finished else seq
            gens.append(Generation(token_ids=seq, logprobs=lps[r][:n], text=self.decode(text_ids), finished=finished))
        return gens

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path, state_dict: Mapping[str, Any] | None = None) -> None:
        """``save_pretrained`` of model (safetensors) and tokenizer: the folder opens with
        ``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained``.
        ``state_dict`` replaces the module's weights (a trainer gathers them from shards)."""
        from transformers.utils import logging as hf_logging

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        hf_logging.disable_progress_bar()  # no shard progress bar in the middle of the run's output
        self.model.save_pretrained(path, state_dict=dict(state_dict) if state_dict is not None else None)
        self.tokenizer.save_pretrained(path)

    def load(self, path: Path) -> None:
        """Copy the weights saved by ``save`` into the existing model (so wrappers that share its
        parameters, such as the algorithm's, stay valid) and reload the saved tokenizer.

        Reads only ``*.safetensors`` and JSON: a ``pytorch_model.bin`` or any other pickle in
        the folder is never opened, so a copied run folder cannot run code here. A missing or
        damaged file, or weights of another shape (a different model size), raise
        CheckpointError with the file and the fix."""
        import torch

        path = Path(path)
        model = self.model
        state = _read_safetensors(path)
        own = model.state_dict()
        if not _keys_match(state, own):
            # transformers may store some architectures under other names than their modules use
            # (fused MoE experts): let it map them, still from safetensors only
            state = _load_through_transformers(path, next(model.parameters()).dtype)
            if not _keys_match(state, own):
                extra = sorted(set(state) - set(own))[:5]
                missing = sorted(k for k in set(own) - set(state))[:5]
                raise CheckpointMismatch(
                    f"the weights in {path} do not fit this policy's model (missing {missing}, unexpected {extra}): "
                    "was the checkpoint written by another model? Resume with the model it was trained with"
                )
        wrong = [f"{k} {tuple(t.shape)} vs {tuple(own[k].shape)}" for k, t in state.items() if t.shape != own[k].shape]
        if wrong:
            raise CheckpointMismatch(
                f"the weights in {path} have other shapes than this policy's model ({'; '.join(wrong[:3])}): the "
                "model's size changed since the checkpoint was written; resume with the original policy options"
            )
        with torch.no_grad():
            for k, t in state.items():
                own[k].copy_(t)
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(path)
        except Exception as e:
            raise CheckpointError(f"the tokenizer in {path} cannot be read ({type(e).__name__}: {e}); the checkpoint is damaged") from e
        tok.padding_side = "left"
        self._tokenizer = tok
        self._prompt_cache = {}


class TinyPolicy(HFPolicy):
    """A small Qwen3 built from a config, with a BPE tokenizer trained on the environment's texts.

    Nothing is downloaded. The tokenizer corpus is the environment's task queries and reference
    actions, its tool schemas, its opening messages and a few random valid actions (from
    ``context.new_env()``), plus a short corpus shipped with the package and the chat template's
    fixed strings. Everything is deterministic: the same environment and ``seed`` (the run seed unless
    the option sets one) give the same tokenizer and the same initial weights on every process.

    The model and tokenizer are built on first use, so ``texts_for_tokenizer`` can still add texts.
    """

    name: ClassVar[str] = "tiny"
    Options: ClassVar[type[BaseModel]] = TinyPolicyOptions

    def __init__(self, options: BaseModel | None = None, context: RunContext | None = None) -> None:
        self._extra_texts: list[str] = []
        super().__init__(options, context)

    def _build(self) -> None:  # lazy: see _ensure
        return None

    @property
    def init_seed(self) -> int:
        """The seed of the initial weights: ``options.seed`` when set, else the run's seed."""
        if self.options.seed is not None:
            return int(self.options.seed)
        return int(self.context.seed) if self.context is not None else 0

    def texts_for_tokenizer(self, texts: list[str]) -> None:
        if self._model is not None:
            self.context_log("tiny policy: the tokenizer is already built; extra texts are ignored")
            return
        self._extra_texts.extend(texts)

    def context_log(self, msg: str) -> None:
        (self.context.log if self.context is not None else print)(msg)

    def _ensure(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import (
            AutoModelForCausalLM,
            AutoTokenizer,
            Qwen3Config,
            Qwen3ForCausalLM,
        )

        from .tokenizer import env_texts, train_tokenizer

        o = self.options
        if o.init_from:
            tok = AutoTokenizer.from_pretrained(o.init_from)
            model = AutoModelForCausalLM.from_pretrained(o.init_from, dtype=torch.float32)
            self._install(model, tok)
            return
        texts: list[str] = []
        if self.context is not None and self.context.make_env is not None:
            env = self.context.new_env()
            try:
                texts = env_texts(env, sample_actions=o.sample_actions, seed=self.init_seed)
            finally:
                try:
                    env.close()
                except Exception:
                    pass
        tok = train_tokenizer(texts + list(o.extra_texts) + self._extra_texts, vocab_size=o.vocab_size)
        if o.hidden_size % o.heads or o.heads % o.kv_heads:
            raise ValueError("tiny policy: hidden_size must be divisible by heads, and heads by kv_heads")
        cfg = Qwen3Config(
            vocab_size=len(tok),
            hidden_size=o.hidden_size,
            intermediate_size=o.intermediate_size or 4 * o.hidden_size,
            num_hidden_layers=o.layers,
            num_attention_heads=o.heads,
            num_key_value_heads=o.kv_heads,
            head_dim=o.hidden_size // o.heads,
            max_position_embeddings=max(o.max_context, 256),
            tie_word_embeddings=True,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=None,
        )
        # Seed the initialisation (then restore the global RNG): the initial weights depend only
        # on `seed` (the run seed unless set), not on what used the RNG before, and are identical
        # on every process.
        state = torch.random.get_rng_state()
        torch.manual_seed(self.init_seed)
        try:
            model = Qwen3ForCausalLM(cfg)
        finally:
            torch.random.set_rng_state(state)
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
        self._install(model, tok)

    @property
    def model(self) -> Any:
        self._ensure()
        return self._model

    @property
    def tokenizer(self) -> Any:
        self._ensure()
        return self._tokenizer

    def encode_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        self._ensure()
        return super().encode_prompt(messages, tools)

    def generate(self, prompts: list[list[int]], **kw: Any) -> list[Generation]:  # type: ignore[override]
        self._ensure()
        return super().generate(prompts, **kw)

    @property  # type: ignore[override]
    def eos_token_id(self) -> int:
        self._ensure()
        return self._eos

    @eos_token_id.setter
    def eos_token_id(self, value: int) -> None:
        self._eos = value


# ---------------------------------------------------------------------- helpers
def cut_at_stop_texts(gen: Generation, stop_texts: list[str], decode: Any) -> Generation:
    """``gen`` ended right after the first token whose text completes one of ``stop_texts``
    (what the ``hf`` policy does while decoding; engines that cannot stop on text, such as
    vLLM without detokenisation, apply it afterwards). Unchanged when no stop text occurs."""
    if not stop_texts or not any(x in gen.text for x in stop_texts):
        return gen
    for n in range(1, len(gen.token_ids) + 1):
        text = decode(gen.token_ids[:n])
        if any(x in text for x in stop_texts):
            if n == len(gen.token_ids) and gen.finished:
                return gen
            return Generation(token_ids=gen.token_ids[:n], logprobs=gen.logprobs[:n], text=text, finished=False)
    return gen


def _read_safetensors(folder: Path) -> dict[str, Any]:
    """Every tensor of a ``save_pretrained`` folder: ``model.safetensors`` or the shards its
    ``model.safetensors.index.json`` lists (plain file names inside ``folder`` only)."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index} is damaged ({type(e).__name__}: {e})") from e
        bad = [n for n in names if not isinstance(n, str) or Path(n).name != n]
        if bad:
            raise CheckpointError(f"{index} names files outside its folder ({bad[:3]}); the checkpoint is damaged")
        files = [folder / n for n in names]
    else:
        files = [folder / "model.safetensors"]
    state: dict[str, Any] = {}
    for f in files:
        if not f.is_file():
            raise CheckpointError(f"{f} is missing: the checkpoint is incomplete (weights are read from safetensors only)")
        try:
            state.update(load_file(str(f), device="cpu"))
        except Exception as e:  # safetensors raises its own error types for a bad header or size
            raise CheckpointError(f"{f} is not a readable safetensors file ({type(e).__name__}: {e}); the checkpoint is damaged") from e
    return state


def _keys_match(state: dict[str, Any], own: dict[str, Any]) -> bool:
    """Same names, allowing weights tied to a loaded one (an lm_head shared with the embedding
    is stored once) to be absent from the file."""
    if set(state) - set(own):
        return False
    loaded = {own[k].data_ptr() for k in state}
    return all(own[k].data_ptr() in loaded for k in set(own) - set(state))


def _load_through_transformers(folder: Path, dtype: Any) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    try:
        loaded = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, use_safetensors=True, trust_remote_code=False)
    except Exception as e:
        raise CheckpointError(f"the weights in {folder} cannot be loaded ({type(e).__name__}: {e})") from e
    return dict(loaded.state_dict())


def _resolve_dtype(name: str) -> Any:
    import torch

    if name == "auto":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def _accepts(model: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _plain_dynamic_cache(cache: Any) -> bool:
    """A cache whose layers hold every position's keys and values as plain tensors, so that one
    row's can be cut out and handed to a later call."""
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return False
    layers = getattr(cache, "layers", None)
    return type(cache) is DynamicCache and bool(layers) and all(type(lay) is DynamicLayer for lay in layers)


def _cache_keyword(model: Any) -> str:
    """transformers 5.x renamed ``past_key_values`` to ``cache`` (in inputs and outputs)."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _end_of_turn_id(tok: Any) -> int:
    """The token that closes an assistant turn: ``<|im_end|>`` or ``<|eot_id|>`` when the
    vocabulary has one, else the tokenizer's eos."""
    vocab = tok.get_vocab()
    for name in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"):
        if name in vocab:
            return int(vocab[name])
    if tok.eos_token_id is None:
        raise ValueError("tokenizer has neither an end-of-turn token nor an eos token")
    return int(tok.eos_token_id)


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the template expects them: content always a string."""
    out = []
    for m in messages:
        m = dict(m)
        c = m.get("content")
        if c is None:
            m["content"] = ""
        elif not isinstance(c, str):
            m["content"] = json.dumps(c, ensure_ascii=False)
        out.append(m)
    return out
