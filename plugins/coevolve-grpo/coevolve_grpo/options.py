"""GRPO's options: the algorithm's (``GRPOOptions``) and its warm start's (``WarmStartOptions``,
``AutoWarmStart``), validated before anything is built."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["GRPOOptions", "WarmStartOptions", "AutoWarmStart", "AUTO_MEASURE"]


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
    patience: int = Field(
        10, ge=1, description="Stop after this many measurements without a new best. A model learning a new world can sit on a "
        "plateau for several checks before the share rises again (the tutorial's library world: 7 checks, 100 to 450 steps); "
        "4 stopped it there, at a fifth of what it reached.",
    )
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
        "(initial weights, tokenised examples, these settings, seed, torch version, device, and on a CPU its model, torch's "
        "kernel set and the thread count, which change the rounding): runs that would compute the same "
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
    guide_failed_groups: bool = Field(
        False, description="In a group where no sample succeeded, train on the task's reference actions in place of its last "
        "sample, when replaying them succeeds: the group then has a success to move towards (a task the agent never solves "
        "otherwise gives no gradient). Off-policy: its old log-probabilities are the policy's before the step.",
    )
    cpu: bool = Field(False, description="Force Accelerate onto the CPU (also chosen when no GPU is present).")
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    seed: int | None = Field(None, description="Seed of torch's RNG (sampling); default: the run seed. Offset by the process rank.")
    warm_start: WarmStartOptions = Field(default_factory=WarmStartOptions)
