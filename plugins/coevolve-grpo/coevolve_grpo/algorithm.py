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
from typing import Any, ClassVar

from pydantic import BaseModel

from coevolve_sdk import (
    Algorithm,
    RolloutGroup,
    RunContext,
    TrainablePolicy,
)

from .checkpoint import Checkpoints
from .options import AUTO_MEASURE, AutoWarmStart, GRPOOptions, WarmStartOptions  # noqa: F401 - importable from here too
from .processes import AccelerateProcesses
from .warm_start import WarmStart, _hold_aside  # noqa: F401

__all__ = ["GRPO", "GRPOOptions", "WarmStartOptions", "AutoWarmStart"]


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


class GRPO(WarmStart, Checkpoints, Algorithm):
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
        #: per model class: whether its output layer may run on the scored positions alone (_scored_rows)
        self._scored_rows_ok: dict[type, bool] = {}
        self._dirty = False  # weights changed on this process outside collectives
        #: guide_failed_groups: each task's reference conversation (or None), built once
        self._guides: dict[str, tuple[list[int], list[int], float] | None] = {}

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

    def _logprobs(self, model: Any, ids: Any, attn: Any, first: int, positions: Any = None, mask: Any = None) -> Any:
        """``lp[:, t] = log p(ids[t] | ids[:t])`` for ``t >= first`` (zeros before), shape [B, L].
        ``positions``: position ids of packed rows (restarting at each conversation).

        ``mask`` (the loss mask, [B, L]): only the positions it marks are needed; where the model
        allows (see ``_scored_rows``), the output layer then runs on those positions alone and
        every other position of ``lp`` is zero."""
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
        if mask is not None:
            scored = self._scored_rows(model, ids, mask, extra)
            if scored is not None:
                rows, cols, lp_rows = scored
                return torch.zeros(ids.shape, dtype=lp_rows.dtype, device=ids.device).index_put((rows, cols + 1), lp_rows)
        if self._uses_logits_to_keep and keep < width:
            logits = model(input_ids=ids, logits_to_keep=keep, **extra).logits
        else:
            logits = model(input_ids=ids, **extra).logits[:, first - 1 :, :]
        lp = selective_logprobs(logits[:, :-1, :], ids[:, first:])
        return torch.nn.functional.pad(lp, (first, 0))

    def _scored_rows(self, model: Any, ids: Any, mask: Any, extra: dict[str, Any]) -> tuple[Any, Any, Any] | None:
        """``(rows, cols, lp)``: the log-probability of each token that ``mask`` marks (token
        ``cols + 1`` of row ``rows``), with the output layer applied to those positions only;
        ``None`` where this model cannot do that.

        Why: the output layer and its log-softmax over the vocabulary are a large share of a
        small model's step, and in a tool-use conversation most tokens after the prompt are tool
        results, which carry no loss. The decoder still runs over every token; only the scored
        positions go through the output layer (about a third of them in the tutorial's world).
        The values are those of the model's full forward, up to float rounding.

        Used only in a single process without mixed precision (a DDP or FSDP model must be
        called through its own forward, and so must one whose forward accelerate wraps in
        autocast), and only where the decoder and the output layer can be called apart and give
        together what the model's forward gives: checked once per model class on a real batch,
        so a model that scales or caps its logits in its forward keeps the full forward.
        """
        import torch

        from .losses import selective_logprobs

        if self._processes.world_size > 1 or self.accelerator.mixed_precision != "no":
            # several processes: the wrapper's forward must run; mixed precision: accelerate turns
            # autocast on inside the prepared model's forward, which the parts called apart would skip
            return None
        ok = self._scored_rows_ok.get(type(model))
        if ok is False:
            return None
        decoder = getattr(model, "base_model", None)
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if decoder is None or decoder is model or head is None:
            self._scored_rows_ok[type(model)] = False
            return None
        rows, cols = torch.nonzero(mask[:, 1:] > 0, as_tuple=True)  # the logits at t - 1 predict token t
        hidden = getattr(decoder(input_ids=ids, **extra), "last_hidden_state", None)
        if hidden is None:  # a decoder that does not return hidden states the usual way
            self._scored_rows_ok[type(model)] = False
            return None
        lp = selective_logprobs(head(hidden[rows, cols]), ids[rows, cols + 1])
        if ok is None and len(rows):  # nothing scored is nothing to compare: decide on a batch that has some
            with torch.no_grad():
                full = model(input_ids=ids, **extra).logits
                ref = selective_logprobs(full[rows, cols], ids[rows, cols + 1])
            ok = bool(torch.allclose(lp.detach().float(), ref.float(), rtol=1e-3, atol=1e-3))
            self._scored_rows_ok[type(model)] = ok
            if not ok:
                return None
        return rows, cols, lp

    def _no_grad_logprobs(self, model: Any, seqs: list[_Seq], attr: str) -> None:
        import torch

        mb = self.options.micro_batch_size  # type: ignore[attr-defined]
        with torch.no_grad():
            for i in range(0, len(seqs), mb):
                chunk = seqs[i : i + mb]
                ids, attn, mask, first = self._batch(chunk)
                lp = self._logprobs(model, ids, attn, first, mask=mask).float().cpu()
                for r, s in enumerate(chunk):
                    setattr(s, attr, lp[r, : len(s.ids)])

    # ------------------------------------------------------------------ data
    def _sequences(self, groups: list[RolloutGroup]) -> tuple[list[list[_Seq]], dict[str, float]]:
        from .losses import group_advantages

        o: GRPOOptions = self.options  # type: ignore[assignment]
        out: list[list[_Seq]] = []
        equal = 0
        rewards: list[float] = []
        guided = 0
        for gi, g in enumerate(groups):
            sampled = [float(t.score) for t in g.trajectories]
            rewards.extend(sampled)
            if len(sampled) > 0 and max(sampled) - min(sampled) < 1e-12:
                equal += 1
            scores = list(sampled)
            guide = self._guide(g) if o.guide_failed_groups and g.trajectories else None
            if guide is not None:  # the reference takes the last sample's place: the group keeps its size
                guided += 1
                scores[-1] = guide[2]
            adv = group_advantages(scores, scale=o.scale_advantages, eps=o.advantage_eps)
            if o.drop_equal_groups and max(scores) - min(scores) < 1e-12:
                continue
            seqs = []
            for t, a in zip(g.trajectories[:-1] if guide is not None else g.trajectories, adv):
                if t.token_ids is None or t.loss_mask is None or t.logprobs is None:
                    raise ValueError(f"trajectory {t.id} of task {g.task.id} has no token_ids/loss_mask/logprobs; roll it out with a token-level policy")
                if not (len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)):
                    raise ValueError(f"trajectory {t.id}: token_ids, loss_mask and logprobs differ in length")
                seqs.append(_Seq(list(t.token_ids), list(t.loss_mask), list(t.logprobs), a, gi))
            if guide is not None:
                seqs.append(self._guide_seq(guide, adv[-1], gi))
            out.append(seqs)
        n = len(rewards)
        stats = {
            "groups": float(len(groups)),
            "equal_reward_groups": float(equal),
            "reward_sum": sum(rewards),
            "reward_sq_sum": sum(r * r for r in rewards),
            "trajectories": float(n),
            "success_sum": float(sum(1 for g in groups for t in g.trajectories if t.success)),
            "guided_groups": float(guided),
        }
        return out, stats

    def _guide(self, group: RolloutGroup) -> tuple[list[int], list[int], float] | None:
        """The reference conversation of ``group``'s task, ``(token_ids, loss_mask, score)``, if
        no sample of the group succeeded and replaying the reference actions does; else None.

        Built as the warm start builds its examples (the same replay and tokenisation, so the
        tokens are the ones a rollout would produce for those actions) and kept per task: a
        task's reference and its replay never change during a run."""
        if any(t.success for t in group.trajectories) or not group.task.reference_actions:
            return None
        cache = self._guides
        key = group.task.id
        if key not in cache:
            found = None
            examples = self.warm_start_examples([group.task])
            if examples:
                env = self.context.new_env()
                try:
                    result = env.replay(group.task, list(group.task.reference_actions))
                finally:
                    try:
                        env.close()
                    except Exception:
                        pass
                if result.success:
                    found = (examples[0][0], examples[0][1], float(result.score))
            cache[key] = found
        return cache[key]

    def _guide_seq(self, guide: tuple[list[int], list[int], float], adv: float, group: int) -> _Seq:
        """A reference conversation as a sequence of the update; its "old" log-probabilities are
        the current policy's (it was not sampled), so its first importance ratio is 1. Computed
        on the decoding module (the full weights, as a rollout would be), which needs no other
        process: under FSDP a forward of the sharded model would wait for every process."""
        ids, mask, _ = guide
        seq = _Seq(list(ids), list(mask), [], adv, group)
        self._no_grad_logprobs(self.policy.module, [seq], "cur")
        seq.old = [float(x) for x in seq.cur]
        seq.cur = None
        return seq

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
                ids, attn, mask, first = self._batch(chunk)
                lp = self._logprobs(self.model, ids, attn, first, mask=mask)
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
        group_keys = ["groups", "equal_reward_groups", "reward_sum", "reward_sq_sum", "trajectories", "success_sum", "guided_groups"]
        g = self._processes.sum([totals.get(k, 0.0) for k in keys] + [gstats[k] for k in group_keys])
        s = dict(zip(keys + group_keys, g))
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
        if o.guide_failed_groups:
            metrics["guided_groups"] = s["guided_groups"]
        if grad_norms:
            metrics["grad_norm"] = sum(grad_norms) / len(grad_norms)
        metrics["logprob_mismatch_max"] = float(totals.get("mismatch_max", 0.0))
        return metrics

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
