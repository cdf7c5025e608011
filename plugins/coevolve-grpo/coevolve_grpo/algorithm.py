"""GRPO (paper Eq. 1) on Hugging Face Accelerate.

One ``step(groups)`` is: group-normalised advantages per task, then ``epochs`` passes over the
groups split into ``mini_batches`` optimiser steps, each accumulated over micro-batches of at
most ``micro_batch_size`` sequences. The importance ratio uses the log-probabilities recorded
at sampling time as pi_old; the KL term compares with a frozen copy of the policy.

The same code runs in one process and under ``accelerate launch`` / ``torchrun``: every process
receives its own groups (the core loop splits the tasks), losses are normalised with totals
counted over all processes, and DDP averages the gradients, so the update equals the one a
single process would make on all the groups.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from coevolve_sdk import (
    Algorithm,
    CheckpointError,
    RolloutGroup,
    RunContext,
    Task,
    TrainablePolicy,
    policy_dir,
)

from .processes import AccelerateProcesses
from .packing import Example, micro_batches, sample_batches

__all__ = ["GRPO", "GRPOOptions", "WarmStartOptions", "AutoWarmStart"]


#: The automatic warm start's stopping rule, part of its cache key (change it when the rule changes).
AUTO_MEASURE = "held-aside-turns-v1"


class AutoWarmStart(BaseModel):
    """When an automatic warm start stops.

    A new world gives no hint of how long behaviour cloning should run: too short and RL never
    sees a success, too long and the model memorises the seed pool (it then reproduces the seed
    tasks and little else, and its samples are too alike for GRPO to compare). ``steps: auto``
    holds a slice of the seed conversations aside and, every ``check_every`` steps, counts the
    share of their agent turns whose every token is the model's greedy choice given the
    conversation so far (teacher-forced exact match): a conversation all of whose turns pass is
    one a greedy rollout would solve by repeating the reference, and the turn share moves before
    whole conversations do. All of it costs one forward pass. Training stops once the share is
    above zero and has not risen for ``patience`` checks (or at ``max_steps``); the held-aside
    slice then measures the generalisation the warm start reached, and the weights of the best
    check are kept.
    """

    model_config = ConfigDict(extra="forbid")

    holdout: float = Field(0.15, gt=0, lt=1, description="Share of the seed conversations held aside to measure (never trained on "
                                                           "during the warm start; RL still uses their tasks).")
    check_every: int = Field(50, ge=1, description="Optimiser steps between two measurements.")
    patience: int = Field(4, ge=1, description="Stop after this many measurements without a new best.")
    min_steps: int = Field(100, ge=0, description="Never stop before this many steps.")
    max_steps: int = Field(3000, ge=1, description="Stop here at the latest.")


class WarmStartOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: int | Literal["auto"] = Field(
        100, description="Optimiser steps of supervised fine-tuning on reference actions (0 = skip), or 'auto': train "
        "until the share of held-aside seed conversations the model reproduces exactly stops rising (see 'auto').",
    )
    auto: AutoWarmStart = Field(default_factory=AutoWarmStart, description="How steps: auto decides when to stop.")
    lr: float = Field(1e-5, gt=0, description="Learning rate (AdamW, constant). The tiny CPU demo uses about 3e-3.")
    batch_size: int = Field(8, ge=1, description="Conversations per optimiser step (over all processes).")
    max_grad_norm: float | None = Field(1.0, gt=0)
    reset_reference: bool = Field(True, description="Take the KL reference from the warm-started model (else: the initial one).")
    layout: Literal["buckets", "packed"] = Field(
        "buckets",
        description="buckets: the batch sorted by length into micro-batches with little padding; packed: conversations "
        "concatenated into rows (pays off with a variable-length attention kernel such as flash_attention_2).",
    )
    micro_batch_tokens: int = Field(
        2048, ge=1, description="Tokens per forward/backward (padded rows x width, or the packed row's length); "
        "a longer conversation gets one of its own. Bounds the warm start's peak memory."
    )
    cache: str | None = Field(
        None, description="A folder where warm-started weights are kept, keyed by a digest of everything they depend on "
        "(initial weights, tokenised examples, these settings, seed, torch version): runs that would compute the same "
        "warm start (the arms of one seed in an experiment) compute it once. One-process runs only; None: no cache."
    )


class GRPOOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lr: float = Field(1e-6, gt=0, description="AdamW learning rate (paper: 1e-6 for 4B-30B models; the tiny CPU demo needs ~1e-3).")
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = Field(0.0, ge=0)
    adam_eps: float = Field(1e-8, gt=0)
    clip_low: float = Field(0.20, ge=0, lt=1, description="epsilon_low: the ratio is clipped below at 1 - clip_low (paper: 0.20).")
    clip_high: float = Field(0.28, ge=0, description="epsilon_high: the ratio is clipped above at 1 + clip_high (paper: 0.28).")
    beta: float = Field(1e-3, ge=0, description="KL coefficient (paper: 1e-3). 0 loads no reference model.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="Per-token KL estimator; k3 = exp(ref-logp) - (ref-logp) - 1.")
    scale_advantages: bool = Field(True, description="Divide R - mean by the group's std (+eps); False = Dr. GRPO's R - mean.")
    advantage_eps: float = Field(1e-6, gt=0)
    loss_norm: Literal["group_tokens", "sequence_mean", "token_mean", "constant"] = Field(
        "group_tokens",
        description="group_tokens: paper (per group, divide by its total tokens; mean over groups); "
        "sequence_mean: original GRPO; token_mean: DAPO; constant: Dr. GRPO.",
    )
    norm_constant: float = Field(1024.0, gt=0, description="Tokens per trajectory assumed by loss_norm=constant.")
    epochs: int = Field(1, ge=1, description="Passes over the step's groups.")
    mini_batches: int = Field(1, ge=1, description="Optimiser steps per epoch; groups are split evenly (never a group in two).")
    micro_batch_size: int = Field(16, ge=1, description="Sequences per forward/backward (gradient accumulation).")
    max_grad_norm: float | None = Field(1.0, gt=0, description="Clip the global gradient norm (None = off).")
    lr_schedule: Literal["constant", "cosine", "linear"] = Field("constant", description="Per training step.")
    warmup_steps: int = Field(0, ge=0)
    total_steps: int | None = Field(None, ge=1, description="Steps of the cosine/linear schedule (needed by those).")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="Floor of cosine/linear decay, as a fraction of lr.")
    old_logprobs: Literal["recorded", "recompute"] = Field(
        "recorded", description="pi_old: the rollout's recorded logprobs, or a no-grad forward before the update."
    )
    drop_equal_groups: bool = Field(False, description="Skip groups whose rewards are all equal (they carry no policy gradient).")
    cpu: bool = Field(False, description="Force Accelerate onto the CPU (also chosen when no GPU is present).")
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    seed: int | None = Field(None, description="Seed of torch's RNG (sampling); default: the run seed. Offset by the process rank.")
    warm_start: WarmStartOptions = Field(default_factory=WarmStartOptions)


class _Counters:
    """Small state saved with every checkpoint (as JSON)."""

    def __init__(self) -> None:
        self.step = 0
        self.optimizer_steps = 0
        self.warm_started = False

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "optimizer_steps": self.optimizer_steps, "warm_started": self.warm_started}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.optimizer_steps = int(state["optimizer_steps"])
        self.warm_started = bool(state["warm_started"])


class _Seq:
    __slots__ = ("ids", "mask", "old", "adv", "group", "ref", "cur")

    def __init__(self, ids: list[int], mask: list[int], old: list[float], adv: float, group: int) -> None:
        self.ids, self.mask, self.old, self.adv, self.group = ids, mask, old, adv, group
        self.ref: Any = None
        self.cur: Any = None


class GRPO(Algorithm):
    """Group Relative Policy Optimisation with clip-higher, a KL reference and Accelerate."""

    name: ClassVar[str] = "grpo"
    Options: ClassVar[type[BaseModel]] = GRPOOptions

    def __init__(self, options: BaseModel | None = None, context: RunContext | None = None) -> None:
        import torch
        from accelerate import Accelerator

        options = options if options is not None else GRPOOptions()
        if context is None:
            raise ValueError("grpo needs a RunContext whose .policy is a trainable policy (hf, tiny, vllm)")
        super().__init__(options, context)
        o: GRPOOptions = self.options  # type: ignore[assignment]
        policy = context.policy
        if not isinstance(policy, TrainablePolicy):
            raise ValueError(
                f"grpo trains the policy's torch module, but policy '{getattr(policy, 'name', type(policy).__name__)}' is "
                "not a TrainablePolicy: use an 'hf', 'tiny' or 'vllm' policy"
            )
        if o.lr_schedule != "constant" and o.total_steps is None:
            raise ValueError(f"lr_schedule={o.lr_schedule!r} needs total_steps")
        self.policy = policy
        self.accelerator = Accelerator(cpu=o.cpu or not torch.cuda.is_available(), mixed_precision=o.mixed_precision)
        acc = self.accelerator
        self._processes = AccelerateProcesses(acc, before_broadcast=self._sync_once)
        torch.manual_seed((o.seed if o.seed is not None else context.seed) * 1009 + acc.process_index)
        model = policy.module
        model.train()
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=o.lr, betas=o.betas, eps=o.adam_eps, weight_decay=o.weight_decay
        )
        from accelerate.utils import DistributedType

        if acc.distributed_type == DistributedType.DEEPSPEED and _zero_stage(acc) == 3:
            raise ValueError(
                "grpo: DeepSpeed ZeRO-3 partitions the parameters, so the rollout would need collective forward "
                "passes on every process; use ZeRO-2 (examples/accelerate/deepspeed-zero2.yaml) or FSDP"
            )
        #: FSDP shards the parameters: decoding then runs on a full copy refreshed after each step.
        self._sharded = acc.distributed_type == DistributedType.FSDP
        full_copy = copy.deepcopy(model) if self._sharded else None
        self.model, self.optimizer = acc.prepare(model, optimizer)
        # The policy decodes with the bare module, which shares the wrapped model's parameters
        # (DDP, ZeRO-2), or with the full copy (FSDP).
        policy.set_decoding_module(full_copy.to(acc.device) if full_copy is not None else acc.unwrap_model(self.model))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.counters = _Counters()
        self.ref_model: Any = None
        if o.beta > 0:
            self._snapshot_reference()
        self._uses_logits_to_keep = _accepts_logits_to_keep(policy.module)
        self._dirty = False  # weights changed on this process outside collectives

    # ------------------------------------------------------------------ distribution
    @property
    def processes(self) -> AccelerateProcesses:
        return self._processes

    def _sync_once(self) -> None:
        """Bring every process to the main process's weights if the main process changed them
        outside the collective path (the warm start, which the core loop runs on the main
        process only). Called by ``broadcast`` and ``step``, which every process calls in the
        same order; costs one tiny object broadcast when nothing changed."""
        if self._processes.world_size == 1:
            self._dirty = False
            return
        import torch
        import torch.distributed as dist

        dirty = self._processes.send(self._dirty if self._processes.is_main_process else None)
        self._dirty = False
        if not dirty:
            return
        if not self._processes.is_main_process:
            self.policy.before_update()  # this process's weights are about to change
        module = self.policy.module  # full weights: the trained module itself, or FSDP's decoding copy
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t.data, src=0)
        if self._sharded:
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
            )

            set_model_state_dict(self.model, module.state_dict(), options=StateDictOptions(full_state_dict=True))
        if dirty == "reset_reference":
            self._snapshot_reference()
        self.counters.warm_started = True

    # ------------------------------------------------------------------ schedule and reference
    def _lr_factor(self, step: int) -> float:
        o: GRPOOptions = self.options  # type: ignore[assignment]
        if o.warmup_steps and step < o.warmup_steps:
            return (step + 1) / o.warmup_steps
        if o.lr_schedule == "constant":
            return 1.0
        total = max(1, (o.total_steps or 1) - o.warmup_steps)
        progress = min(1.0, (step - o.warmup_steps) / total)
        if o.lr_schedule == "cosine":
            decay = 0.5 * (1.0 + math.cos(math.pi * progress))
        else:
            decay = 1.0 - progress
        return o.min_lr_ratio + (1.0 - o.min_lr_ratio) * decay

    def _refresh_full_copy(self) -> None:
        """FSDP only: gather the full weights (every process calls this) into the decoding copy."""
        if not self._sharded:
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        full = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=False))
        self.policy.module.load_state_dict(full, strict=False)

    def _snapshot_reference(self) -> None:
        # The decoding module holds full weights in every mode (shared with training, or refreshed).
        ref = copy.deepcopy(self.policy.module)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        self.ref_model = ref

    # ------------------------------------------------------------------ forward
    def _batch(self, seqs: list[_Seq]) -> tuple[Any, Any, Any, int]:
        """Right-padded ids, attention mask and loss mask; and the first position with a loss."""
        import torch

        pad = self.policy.pad_token_id
        width = max(len(s.ids) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        attn = torch.zeros((len(seqs), width), dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.float32)
        first = width
        for r, s in enumerate(seqs):
            n = len(s.ids)
            ids[r, :n] = torch.tensor(s.ids, dtype=torch.long)
            attn[r, :n] = 1
            m = torch.tensor(s.mask[:n], dtype=torch.float32)
            m[0] = 0.0  # the first token has no prediction
            mask[r, :n] = m
            nz = torch.nonzero(m)
            if len(nz):
                first = min(first, int(nz[0]))
        dev = self.accelerator.device
        return ids.to(dev), attn.to(dev), mask.to(dev), max(1, min(first, width - 1))

    def _logprobs(self, model: Any, ids: Any, attn: Any, first: int, positions: Any = None) -> Any:
        """``lp[:, t] = log p(ids[t] | ids[:t])`` for ``t >= first`` (zeros before), shape [B, L].
        ``positions``: position ids of packed rows (restarting at each conversation)."""
        import torch

        from .losses import selective_logprobs

        width = ids.shape[1]
        keep = width - first + 1
        # Rows are right-padded, so under causal attention no real token ever sees a pad: the
        # padding mask can be dropped, which lets attention take its fused causal path. Pad
        # positions produce garbage that the zero loss weights discard.
        # No KV cache in a training forward (transformers builds one by default, and with one it
        # ignores the packing that restarting position ids announce).
        extra: dict[str, Any] = {"use_cache": False}
        if positions is not None:
            extra["position_ids"] = positions
        if self._uses_logits_to_keep and keep < width:
            logits = model(input_ids=ids, logits_to_keep=keep, **extra).logits
        else:
            logits = model(input_ids=ids, **extra).logits[:, first - 1 :, :]
        lp = selective_logprobs(logits[:, :-1, :], ids[:, first:])
        return torch.nn.functional.pad(lp, (first, 0))

    def _no_grad_logprobs(self, model: Any, seqs: list[_Seq], attr: str) -> None:
        import torch

        mb = self.options.micro_batch_size  # type: ignore[attr-defined]
        with torch.no_grad():
            for i in range(0, len(seqs), mb):
                chunk = seqs[i : i + mb]
                ids, attn, _, first = self._batch(chunk)
                lp = self._logprobs(model, ids, attn, first).float().cpu()
                for r, s in enumerate(chunk):
                    setattr(s, attr, lp[r, : len(s.ids)])

    # ------------------------------------------------------------------ data
    def _sequences(self, groups: list[RolloutGroup]) -> tuple[list[list[_Seq]], dict[str, float]]:
        from .losses import group_advantages

        o: GRPOOptions = self.options  # type: ignore[assignment]
        out: list[list[_Seq]] = []
        equal = 0
        rewards: list[float] = []
        for gi, g in enumerate(groups):
            scores = [float(t.score) for t in g.trajectories]
            rewards.extend(scores)
            adv = group_advantages(scores, scale=o.scale_advantages, eps=o.advantage_eps)
            if len(scores) > 0 and max(scores) - min(scores) < 1e-12:
                equal += 1
                if o.drop_equal_groups:
                    continue
            seqs = []
            for t, a in zip(g.trajectories, adv):
                if t.token_ids is None or t.loss_mask is None or t.logprobs is None:
                    raise ValueError(f"trajectory {t.id} of task {g.task.id} has no token_ids/loss_mask/logprobs; roll it out with a token-level policy")
                if not (len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)):
                    raise ValueError(f"trajectory {t.id}: token_ids, loss_mask and logprobs differ in length")
                seqs.append(_Seq(list(t.token_ids), list(t.loss_mask), list(t.logprobs), a, gi))
            out.append(seqs)
        n = len(rewards)
        stats = {
            "groups": float(len(groups)),
            "equal_reward_groups": float(equal),
            "reward_sum": sum(rewards),
            "reward_sq_sum": sum(r * r for r in rewards),
            "trajectories": float(n),
            "success_sum": float(sum(1 for g in groups for t in g.trajectories if t.success)),
        }
        return out, stats

    # ------------------------------------------------------------------ one optimiser step's loss
    def _backward_minibatch(self, groups: list[list[_Seq]], *, record_mismatch: bool) -> dict[str, float]:
        """Forward and backward over one mini-batch (its groups), accumulating gradients.

        Totals for the normalisation are summed over processes, and every process runs the
        same number of micro-batches (empty ones run a zero-weight forward) so that DDP's
        collective calls line up.
        """
        import contextlib

        import torch

        from .losses import grpo_token_loss, token_weights

        o: GRPOOptions = self.options  # type: ignore[assignment]
        acc = self.accelerator
        seqs = [s for g in groups for s in g]
        masks = []
        for s in seqs:
            m = torch.tensor(s.mask, dtype=torch.float32)
            m[0] = 0.0
            masks.append(m)
        local = [float(sum(1 for g in groups if g)), float(len(seqs)), float(sum(float(m.sum()) for m in masks))]
        tot_groups, tot_seqs, tot_tokens = self._processes.sum(local)
        weights = token_weights(
            masks, [s.group for s in seqs], o.loss_norm,
            total_groups=max(tot_groups, 1.0), total_sequences=max(tot_seqs, 1.0), total_tokens=max(tot_tokens, 1.0),
            constant=o.norm_constant,
        )
        scale = float(self._processes.world_size)  # DDP averages gradients over processes
        mb = o.micro_batch_size
        n_micro = self._processes.max(math.ceil(len(seqs) / mb) if seqs else 0)
        sums = {"loss": 0.0, "pg": 0.0, "kl": 0.0, "tokens": 0.0, "clipped_low": 0.0, "clipped_high": 0.0, "ratio_sum": 0.0,
                "kl_sum": 0.0, "mismatch_abs_sum": 0.0, "mismatch_max": 0.0, "mismatch_tokens": 0.0}
        for i in range(n_micro):
            chunk = seqs[i * mb : (i + 1) * mb]
            last = i == n_micro - 1
            ctx = acc.no_sync(self.model) if (not last and self._processes.world_size > 1) else contextlib.nullcontext()
            with ctx:
                if not chunk:
                    # Keep the collectives in step with the other processes: a forward whose
                    # loss is zero still produces (zero) gradients for every parameter.
                    dummy = torch.full((1, 2), self.policy.pad_token_id, dtype=torch.long, device=acc.device)
                    out = self.model(input_ids=dummy).logits
                    acc.backward(out.sum() * 0.0)
                    continue
                ids, attn, _, first = self._batch(chunk)
                lp = self._logprobs(self.model, ids, attn, first)
                width = ids.shape[1]
                dev = ids.device
                w = torch.zeros((len(chunk), width), device=dev)
                old = torch.zeros((len(chunk), width), device=dev)
                ref = torch.zeros((len(chunk), width), device=dev) if o.beta > 0 else None
                adv = torch.tensor([s.adv for s in chunk], dtype=torch.float32, device=dev)
                for r, s in enumerate(chunk):
                    n = len(s.ids)
                    w[r, :n] = weights[i * mb + r][:n].to(dev)
                    old_r = s.cur if (o.old_logprobs == "recompute" and s.cur is not None) else torch.tensor(s.old, dtype=torch.float32)
                    old[r, :n] = old_r[:n].to(dev)
                    if ref is not None:
                        ref[r, :n] = s.ref[:n].to(dev)
                loss, st = grpo_token_loss(
                    lp, old, adv, w, clip_low=o.clip_low, clip_high=o.clip_high, beta=o.beta, ref_logp=ref, kl_estimator=o.kl_estimator
                )
                acc.backward(loss * scale)
                sums["loss"] += float(loss.detach())
                sums["pg"] += float(st["pg_weighted"])
                sums["kl"] += float(st["kl_weighted"])
                for k in ("tokens", "clipped_low", "clipped_high", "ratio_sum", "kl_sum"):
                    sums[k] += float(st[k])
                if record_mismatch:
                    with torch.no_grad():
                        recorded = torch.zeros_like(lp)
                        for r, s in enumerate(chunk):
                            recorded[r, : len(s.ids)] = torch.tensor(s.old, dtype=torch.float32, device=dev)
                        m = (w != 0).float()
                        d = (lp.detach() - recorded).abs() * m
                        sums["mismatch_abs_sum"] += float(d.sum())
                        sums["mismatch_max"] = max(sums["mismatch_max"], float(d.max()) if d.numel() else 0.0)
                        sums["mismatch_tokens"] += float(m.sum())
        return sums

    def loss_and_grad(self, groups: list[RolloutGroup]) -> float:
        """Zero the gradients, then run forward and backward on ``groups`` as one mini-batch.

        Leaves the gradients in the parameters and returns this process's loss. Used by tests
        (to compare against a reference computation) and by the update-phase benchmark.
        """
        self._sync_once()
        batches, _ = self._sequences(groups)
        self._prepare_logprobs([s for g in batches for s in g])
        self.optimizer.zero_grad(set_to_none=True)
        return self._backward_minibatch(batches, record_mismatch=False)["loss"]

    def _prepare_logprobs(self, seqs: list[_Seq]) -> None:
        o: GRPOOptions = self.options  # type: ignore[assignment]
        if o.beta > 0:
            if self.ref_model is None:
                self._snapshot_reference()
            self._no_grad_logprobs(self.ref_model, seqs, "ref")
        if o.old_logprobs == "recompute":
            self._no_grad_logprobs(self.model, seqs, "cur")

    @staticmethod
    def _recomputed_mismatch(seqs: list[_Seq]) -> dict[str, float]:
        """|recomputed pre-update logprob - recorded logprob| over the agent tokens of ``seqs``."""
        import torch

        total, worst, count = 0.0, 0.0, 0.0
        for s in seqs:
            m = torch.tensor(s.mask, dtype=torch.float32)
            m[0] = 0.0  # the first token has no prediction
            d = (s.cur.float() - torch.tensor(s.old, dtype=torch.float32)).abs() * m
            total += float(d.sum())
            worst = max(worst, float(d.max()) if d.numel() else 0.0)
            count += float(m.sum())
        return {"mismatch_abs_sum": total, "mismatch_max": worst, "mismatch_tokens": count}

    # ------------------------------------------------------------------ the step
    def step(self, groups: list[RolloutGroup]) -> dict[str, float]:
        o: GRPOOptions = self.options  # type: ignore[assignment]
        acc = self.accelerator
        t0 = time.perf_counter()
        self._sync_once()
        self.model.train()
        batches, gstats = self._sequences(groups)
        seqs = [s for g in batches for s in g]
        self._prepare_logprobs(seqs)
        # Same number of optimiser steps on every process: split the local groups into exactly
        # `mini_batches` parts (some may be empty).
        parts: list[list[list[_Seq]]] = [batches[i :: o.mini_batches] for i in range(o.mini_batches)]
        # The rollout/training mismatch compares the trainer's log-probabilities *before* this
        # step's first update with the recorded ones: in recompute mode those are the no-grad
        # values just computed, for every sequence; in recorded mode the first mini-batch's
        # forward (later mini-batches run on weights the earlier ones already moved).
        totals: dict[str, float] = self._recomputed_mismatch(seqs) if o.old_logprobs == "recompute" else {}
        grad_norms: list[float] = []
        for epoch in range(o.epochs):
            for pi, part in enumerate(parts):
                sums = self._backward_minibatch(part, record_mismatch=(epoch == 0 and pi == 0 and o.old_logprobs == "recorded"))
                if o.max_grad_norm is not None:
                    gn = acc.clip_grad_norm_(self.model.parameters(), o.max_grad_norm)
                    grad_norms.append(float(gn))
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.counters.optimizer_steps += 1
                for k, v in sums.items():
                    totals[k] = max(totals.get(k, 0.0), v) if k == "mismatch_max" else totals.get(k, 0.0) + v
        lr = float(self.scheduler.get_last_lr()[0])
        self.scheduler.step()
        self.counters.step += 1
        self._refresh_full_copy()
        keys = ["tokens", "clipped_low", "clipped_high", "ratio_sum", "kl_sum", "mismatch_abs_sum", "mismatch_tokens", "loss", "pg", "kl"]
        g = self._processes.sum([totals.get(k, 0.0) for k in keys] + [gstats[k] for k in ("groups", "equal_reward_groups", "reward_sum", "reward_sq_sum", "trajectories", "success_sum")])
        s = dict(zip(keys + ["groups", "equal_reward_groups", "reward_sum", "reward_sq_sum", "trajectories", "success_sum"], g))
        tok = max(s["tokens"], 1.0)
        n = max(s["trajectories"], 1.0)
        mean_r = s["reward_sum"] / n
        updates = max(1, o.epochs * o.mini_batches)
        elapsed = time.perf_counter() - t0
        metrics = {
            "loss": s["loss"] / updates,
            "pg_loss": s["pg"] / updates,
            "kl_loss": s["kl"] / updates,
            "kl": s["kl_sum"] / tok,
            "ratio_mean": s["ratio_sum"] / tok,
            "clip_frac_low": s["clipped_low"] / tok,
            "clip_frac_high": s["clipped_high"] / tok,
            "clip_frac": (s["clipped_low"] + s["clipped_high"]) / tok,
            "reward_mean": mean_r,
            "reward_std": math.sqrt(max(0.0, s["reward_sq_sum"] / n - mean_r * mean_r)),
            "success_rate": s["success_sum"] / n,
            "groups": s["groups"],
            "equal_reward_groups": s["equal_reward_groups"],
            "equal_reward_frac": s["equal_reward_groups"] / max(s["groups"], 1.0),
            "trained_tokens": s["tokens"] / o.epochs,
            "logprob_mismatch_mean": s["mismatch_abs_sum"] / max(s["mismatch_tokens"], 1.0),
            "lr": lr,
            "optimizer_steps": float(updates),
            "update_seconds": elapsed,
            "update_tokens_per_s": s["tokens"] / elapsed if elapsed > 0 else 0.0,
        }
        if grad_norms:
            metrics["grad_norm"] = sum(grad_norms) / len(grad_norms)
        metrics["logprob_mismatch_max"] = float(totals.get("mismatch_max", 0.0))
        return metrics

    # ------------------------------------------------------------------ warm start (behaviour cloning)
    def warm_start_examples(self, tasks: list[Task]) -> list[tuple[list[int], list[int]]]:
        """Replay each task's reference actions in a fresh environment and tokenise the
        conversation, the actions as assistant turns: ``(token_ids, loss_mask)`` per task."""
        policy = self.policy
        examples: list[tuple[list[int], list[int]]] = []
        for task in tasks:
            if not task.reference_actions:
                continue
            env = self.context.new_env()
            try:
                _, info = env.reset(seed=self.context.seed, options={"task": task})
                ids = list(policy.encode_prompt(info["messages"], info["tools"]))
                mask = [0] * len(ids)
                for a_i, action in enumerate(task.reference_actions):
                    comp = policy.encode_completion(action)
                    ids += comp
                    mask += [1] * len(comp)
                    _, _, terminated, truncated, info = env.step(action)
                    if terminated or truncated or a_i == len(task.reference_actions) - 1:
                        break
                    follow = policy.encode_followup(info.get("messages", []))
                    ids += follow
                    mask += [0] * len(follow)
            finally:
                try:
                    env.close()
                except Exception:
                    pass
            if len(ids) > policy.max_context:
                continue
            examples.append((ids, mask))
        return examples

    def warm_start(self, tasks: list[Task]) -> dict[str, float]:
        """Supervised fine-tuning on the seed tasks' reference actions (loss on agent tokens,
        token mean per batch).

        Runs in this process alone, on the bare model, with its own AdamW (the GRPO optimiser
        state is untouched), so it works whether the loop calls it on the main process only
        (as the core loop does) or on every process. In a multi-process run the other processes
        receive the main process's result at the next ``broadcast`` or ``step`` (see ``_sync_once``).
        """

        ws = self.options.warm_start  # type: ignore[attr-defined]
        if ws.steps == 0:
            return {"warm_start_steps": 0.0}
        examples = self.warm_start_examples(tasks)
        if not examples:
            raise ValueError("warm start: none of the tasks has reference actions that fit the context")
        # The full-weight module: shared with the trained model (one process, DDP, ZeRO-2) or, under
        # FSDP, the decoding copy, which reaches the shards at the next sync.
        self.policy.before_update()
        module = self.policy.module
        if ws.cache and self._processes.world_size == 1:
            from .warm_cache import cache_lock, load_entry, save_entry, warm_start_key

            root = Path(ws.cache)
            settings = ws.model_dump(exclude={"cache"})
            if ws.steps == "auto":
                settings["auto_measure"] = AUTO_MEASURE  # the stopping rule is code: a new rule is a new entry
            key = warm_start_key(module, examples, settings, self.context.seed)
            with cache_lock(root, key):
                cached = load_entry(root, key, module)
                if cached is None:
                    metrics = self._warm_start_steps(module, examples)
                    save_entry(root, key, module, metrics)
                    return metrics
            self.context.log(f"warm start: reusing the identical warm start cached in {root / key}")
            self._after_warm_start()
            return {**cached, "warm_start_cached": 1.0}
        return self._warm_start_steps(module, examples)

    def _warm_start_steps(self, module: Any, examples: list[Example]) -> dict[str, float]:
        import torch

        ws: WarmStartOptions = self.options.warm_start  # type: ignore[attr-defined]
        auto = ws.steps == "auto"
        held: list[Example] = []
        train = examples
        if auto:
            train, held = _hold_aside(examples, ws.auto.holdout, self.context.seed)
        total = ws.auto.max_steps if auto else int(ws.steps)
        params = [p for p in module.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=ws.lr, weight_decay=0.0)
        losses: list[float] = []
        t0 = time.perf_counter()
        module.train()
        tokens = 0.0
        processed = 0.0
        best, best_step, best_conv, best_state, since_best, done = -1.0, 0, 0.0, None, 0, 0
        checks: list[float] = []
        for step_i, idx in enumerate(sample_batches(len(train), total, ws.batch_size, self.context.seed + 17)):
            if self._processes.is_main_process:
                self.context.progress("warm start", step_i, total)
            loss, n_tok, n_in = self.sft_backward(module, [train[i] for i in idx])
            if ws.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, ws.max_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss)
            tokens += n_tok
            processed += n_in
            done = step_i + 1
            if auto and (done % ws.auto.check_every == 0 or done == total):
                conv_share, share = self.reproduced(module, held)
                checks.append(share)
                module.train()
                if share > best:
                    best, best_step, best_conv, since_best = share, done, conv_share, 0
                    best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
                else:
                    since_best += 1
                if self._processes.is_main_process:
                    self.context.log(f"warm start: step {done}, held-aside turns reproduced {share:.3f}, whole conversations "
                                     f"{conv_share:.3f} (best turns {best:.3f} at step {best_step})")
                # a share still at zero is no plateau: the model has not reached the level where it is measured
                if done >= ws.auto.min_steps and best > 0 and (since_best >= ws.auto.patience or share >= 1.0):
                    break
        if auto and best_state is not None and best_step != done:
            module.load_state_dict(best_state)
        if self._processes.is_main_process:
            self.context.progress("warm start", total, total)
        self._after_warm_start()
        elapsed = time.perf_counter() - t0
        head = losses[: max(1, len(losses) // 10)]
        tail = losses[-max(1, len(losses) // 10) :]
        out = {
            "warm_start_steps": float(best_step if auto else done),
            "warm_start_examples": float(len(train)),
            "warm_start_loss_first": sum(head) / len(head),
            "warm_start_loss_last": sum(tail) / len(tail),
            "warm_start_tokens": tokens,
            "warm_start_input_tokens": processed,
            "warm_start_seconds": elapsed,
            "warm_start_tokens_per_s": processed / elapsed if elapsed > 0 else 0.0,
        }
        if auto:
            out |= {"warm_start_steps_run": float(done), "warm_start_held_aside": float(len(held)),
                    "warm_start_held_aside_turns": best, "warm_start_held_aside_match": best_conv,
                    "warm_start_checks": float(len(checks))}
        return out

    def exact_match(self, module: Any, examples: list[Example]) -> float:
        """The share of ``examples`` whose every agent token is the model's most likely token
        given the conversation before it (teacher forcing). For a conversation replayed from
        reference actions this is whether a greedy rollout would repeat the reference: the
        observations between the agent's turns are the same as long as its actions are."""
        return self.reproduced(module, examples)[0]

    def reproduced(self, module: Any, examples: list[Example]) -> tuple[float, float]:
        """(share of conversations, share of agent turns) that greedy decoding reproduces
        exactly under teacher forcing. The turn share moves before whole conversations do, so
        the automatic warm start watches it; the conversation share is what it reports."""
        import torch

        if not examples:
            return 0.0, 0.0
        module.eval()
        dev = self.accelerator.device
        pad = self.policy.pad_token_id
        convs = turns = turns_ok = 0
        with torch.no_grad():
            for mb in micro_batches(examples, "buckets", self.options.warm_start.micro_batch_tokens):  # type: ignore[attr-defined]
                width = max(len(r) for r in mb.ids)
                ids = torch.full((len(mb.ids), width), pad, dtype=torch.long)
                for r, row in enumerate(mb.ids):
                    ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
                ids = ids.to(dev)
                with self.accelerator.autocast():
                    logits = module(input_ids=ids, use_cache=False).logits
                guess = logits[:, :-1, :].argmax(-1).cpu()
                for r, (row, m) in enumerate(zip(mb.ids, mb.mask)):
                    ok = (guess[r, : len(row) - 1] == torch.tensor(row[1:], dtype=torch.long)).tolist()
                    all_ok = True
                    t = 1
                    while t < len(row):  # agent turns: the runs of 1s in the mask (position 0 has no prediction)
                        if not m[t]:
                            t += 1
                            continue
                        u = t
                        while u < len(row) and m[u]:
                            u += 1
                        hit = all(ok[t - 1 : u - 1])
                        turns += 1
                        turns_ok += int(hit)
                        all_ok &= hit
                        t = u
                    convs += int(all_ok)
        return convs / len(examples), turns_ok / max(turns, 1)

    def _after_warm_start(self) -> None:
        ws = self.options.warm_start  # type: ignore[attr-defined]
        self.counters.warm_started = True
        reset = self.options.beta > 0 and ws.reset_reference  # type: ignore[attr-defined]
        if reset:
            self._snapshot_reference()
        self._dirty = "reset_reference" if reset else True

    def sft_backward(self, module: Any, batch: list[Example]) -> tuple[float, float, float]:
        """Forward and backward of the warm start's loss on one batch of conversations, laid out
        as ``warm_start.layout`` says: the token mean of ``-log p`` over the agent tokens (each
        conversation's first token excluded, as in the GRPO update), whatever the layout.

        Leaves the gradients in ``module``'s parameters; returns (loss, agent tokens, real
        tokens forwarded)."""
        import torch

        ws = self.options.warm_start  # type: ignore[attr-defined]
        n_tok = float(sum(sum(m[1:]) for _, m in batch))
        dev = self.accelerator.device
        pad = self.policy.pad_token_id
        loss_sum = 0.0
        for mb in micro_batches(batch, ws.layout, ws.micro_batch_tokens):
            width = max(len(r) for r in mb.ids)
            ids = torch.full((len(mb.ids), width), pad, dtype=torch.long)
            mask = torch.zeros((len(mb.ids), width), dtype=torch.float32)
            for r, (row, m) in enumerate(zip(mb.ids, mb.mask)):
                ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
                mask[r, : len(row)] = torch.tensor(m, dtype=torch.float32)
            nz = torch.nonzero(mask.sum(0))
            first = max(1, min(int(nz[0]) if len(nz) else width - 1, width - 1))
            positions = torch.tensor(mb.positions, dtype=torch.long, device=dev) if mb.positions is not None else None
            ids, mask = ids.to(dev), mask.to(dev)
            with self.accelerator.autocast():
                lp = self._logprobs(module, ids, None, first, positions)
            loss = -(lp * mask).sum() / max(n_tok, 1.0)
            loss.backward()
            loss_sum += float(loss.detach())
        return loss_sum, n_tok, float(sum(len(i) for i, _ in batch))

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: Path) -> None:
        """Write the trainer's state into ``path`` (a checkpoint's ``algorithm/`` folder) as data
        only, tensors in safetensors and the rest in JSON (see :mod:`coevolve_grpo.state_files`):

        * ``trainer.json``: counters, LR scheduler, how many processes wrote the checkpoint;
        * ``optimizer.json`` / ``.safetensors``: AdamW's state (``optimizer-rankN`` per process
          under DeepSpeed, whose optimiser state is partitioned);
        * ``rng-rankN.json`` / ``.safetensors``: each process's random generators;
        * ``reference.safetensors``: the KL reference model (β > 0).

        The policy's weights go to the sibling ``policy/`` folder through the policy's own
        ``save`` (gathered into full tensors first when they are sharded). Call on every process.
        """
        from safetensors.torch import save_model

        from .state_files import rng_state, save_tree

        path = Path(path)
        acc = self.accelerator
        path.mkdir(parents=True, exist_ok=True)
        weights = acc.get_state_dict(self.model)  # a collective when the parameters are sharded
        optim = self._optimizer_state()  # likewise
        save_tree(rng_state(), path, f"rng-rank{self._processes.rank}")
        if self._optimizer_per_rank:
            save_tree(optim, path, f"optimizer-rank{self._processes.rank}")
        if acc.is_main_process:
            self.policy.save(policy_dir(path), state_dict=weights)
            if not self._optimizer_per_rank:
                save_tree(optim, path, "optimizer")
            save_tree(
                {
                    "format": 2,
                    "counters": self.counters.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "processes": self._processes.world_size,
                    "reference": self.ref_model is not None,
                },
                path,
                "trainer",
            )
            if self.ref_model is not None:
                save_model(self.ref_model, str(path / "reference.safetensors"))
        acc.wait_for_everyone()

    def load(self, path: Path) -> None:
        """Restore what ``save`` wrote, or what versions before it wrote (``accelerate/``,
        ``policy/`` and ``reference/`` inside ``path``), without unpickling anything that could
        run code. CheckpointError names the file when one is missing or damaged."""
        path = Path(path)
        if (path / "trainer.json").is_file():
            self._load_current(path)
        elif (path / "accelerate").is_dir():
            self._load_legacy(path)
        else:
            raise CheckpointError(
                f"{path} holds no GRPO state (neither trainer.json nor the accelerate/ folder of older versions): the "
                "checkpoint is incomplete or was written by another algorithm"
            )
        self._dirty = False  # every process loaded the same weights

    def _load_current(self, path: Path) -> None:
        from .state_files import load_tree, set_rng_state, tree_exists

        trainer = load_tree(path, "trainer")
        try:
            counters, scheduler, had_reference = trainer["counters"], trainer["scheduler"], bool(trainer["reference"])
        except (KeyError, TypeError) as e:
            raise CheckpointError(f"{path / 'trainer.json'} lacks {e}; the checkpoint is damaged") from e
        self._load_weights([policy_dir(path), path / "policy"])
        name = f"optimizer-rank{self._processes.rank}" if self._optimizer_per_rank else "optimizer"
        self._set_optimizer_state(load_tree(path, name), path / f"{name}.json")
        self._set_scheduler_and_counters(scheduler, counters, path / "trainer.json")
        if self.ref_model is not None or self.options.beta > 0:  # type: ignore[attr-defined]
            if had_reference:
                self._load_reference(path / "reference.safetensors")
            else:
                self.context.log(f"{path} has no KL reference (it was written with beta 0): the reference is the loaded policy")
                self._snapshot_reference()
        if tree_exists(path, f"rng-rank{self._processes.rank}"):
            set_rng_state(load_tree(path, f"rng-rank{self._processes.rank}"))
        else:
            self.context.log(
                f"{path} has no random state for process {self._processes.rank} (it was written by {trainer.get('processes')} "
                "process(es)): sampling after the resume differs from an uninterrupted run"
            )

    def _load_legacy(self, path: Path) -> None:
        """A checkpoint of an earlier version: Accelerate's ``save_state`` folder. Each pickle is
        read with torch's restricted unpickler; the RNG files (which need numpy objects) are not
        read, so sampling after this resume is not bit-identical to an uninterrupted run."""
        from .state_files import load_legacy

        acc_dir = path / "accelerate"
        self._load_weights([path / "policy"])
        self._set_optimizer_state(load_legacy(acc_dir / "optimizer.bin"), acc_dir / "optimizer.bin")
        # the old GRPO registered the scheduler, then the counters, for checkpointing
        scheduler = load_legacy(acc_dir / "custom_checkpoint_0.pkl")
        counters = load_legacy(acc_dir / "custom_checkpoint_1.pkl")
        self._set_scheduler_and_counters(scheduler, counters, acc_dir / "custom_checkpoint_*.pkl")
        ref_file = path / "reference" / "reference.pt"
        if self.options.beta > 0 and ref_file.exists():  # type: ignore[attr-defined]
            state = load_legacy(ref_file)
            if self.ref_model is None:
                self._snapshot_reference()
            try:
                self.ref_model.load_state_dict(state)
            except (RuntimeError, TypeError, AttributeError) as e:
                raise CheckpointError(f"{ref_file} does not fit the model ({e})") from e
        self.context.log(
            f"{path} was written by an earlier version (accelerate/ folder): its random states are pickles, which "
            "are not loaded, so sampling after this resume differs from an uninterrupted run"
        )

    def _load_weights(self, candidates: list[Path]) -> None:
        folder = next((c for c in candidates if c.is_dir()), None)
        if folder is None:
            raise CheckpointError(f"no policy weights at {' or '.join(str(c) for c in candidates)}: the checkpoint is incomplete")
        self.policy.before_update()
        self.policy.load(folder)
        if self._sharded:  # the policy loaded its full-weight copy; the trained shards follow it
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
            )

            set_model_state_dict(self.model, self.policy.module.state_dict(), options=StateDictOptions(full_state_dict=True))

    def _load_reference(self, file: Path) -> None:
        from safetensors.torch import load_model

        if self.ref_model is None:
            self._snapshot_reference()
        if not file.is_file():
            raise CheckpointError(f"{file} is missing: the checkpoint is incomplete (it was written with a KL reference)")
        try:
            load_model(self.ref_model, str(file), strict=True, device=str(self.accelerator.device))
        except Exception as e:  # safetensors' own error types for a bad header; RuntimeError for wrong keys
            raise CheckpointError(f"{file} cannot be loaded into the reference model ({type(e).__name__}: {e})") from e

    @property
    def _optimizer_per_rank(self) -> bool:
        from accelerate.utils import DistributedType

        return self.accelerator.distributed_type == DistributedType.DEEPSPEED

    def _optimizer_state(self) -> Any:
        """The optimiser's state as plain data. Under FSDP the full state, gathered with torch's
        distributed state-dict API (every process must call this)."""
        if self._sharded:
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_optimizer_state_dict,
            )

            return get_optimizer_state_dict(
                self.model, self.optimizer.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
        return self.optimizer.state_dict()

    def _set_optimizer_state(self, state: Any, file: Path) -> None:
        try:
            if self._sharded:
                from torch.distributed.checkpoint.state_dict import (
                    StateDictOptions,
                    set_optimizer_state_dict,
                )

                set_optimizer_state_dict(
                    self.model, self.optimizer.optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True)
                )
            else:
                self.optimizer.load_state_dict(state)
        except (ValueError, KeyError, TypeError, RuntimeError, IndexError) as e:
            raise CheckpointError(f"the optimiser state in {file} does not fit this model ({type(e).__name__}: {e})") from e

    def _set_scheduler_and_counters(self, scheduler: Any, counters: Any, file: Path) -> None:
        expected = self.scheduler.state_dict()
        if not isinstance(scheduler, dict) or set(scheduler) - set(expected):
            raise CheckpointError(f"the LR scheduler state in {file} is not one this algorithm wrote; the checkpoint is damaged")
        try:
            self.scheduler.load_state_dict(scheduler)
            self.counters.load_state_dict(counters)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"the scheduler or step counters in {file} are damaged ({type(e).__name__}: {e})") from e


def _zero_stage(acc: Any) -> int:
    plugin = getattr(acc.state, "deepspeed_plugin", None)
    try:
        return int(plugin.zero_stage) if plugin is not None else 0
    except (TypeError, ValueError, AttributeError):
        return 0


def _accepts_logits_to_keep(model: Any) -> bool:
    import inspect

    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _hold_aside(examples: list[Example], share: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Split the warm start's conversations into (trained on, held aside), by a draw that
    follows the run's seed. At least one conversation on each side when there are two or more."""
    import random

    order = list(range(len(examples)))
    random.Random(seed * 1_000_003 + 29).shuffle(order)
    n_held = min(max(1, round(share * len(examples))), len(examples) - 1) if len(examples) > 1 else 0
    held = sorted(order[:n_held])
    keep = sorted(order[n_held:])
    return [examples[i] for i in keep] or list(examples), [examples[i] for i in held]
