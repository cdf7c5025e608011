"""The GRPO arithmetic, as plain functions of tensors (no model, no distribution).

Kept apart from the training loop so that each piece can be checked against a per-token
reference computation, and so that the loop stays about batching and bookkeeping.

Notation (paper Eq. 1): for trajectory k of a group and its agent token t,
``r = exp(logp - logp_old)``, ``A_k`` the group-normalised advantage, and the per-token loss

    l = -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A) + beta * KL_t

The loss of a batch is ``sum(w * l)`` over agent tokens, where the weights ``w`` carry the
normalisation (see :func:`token_weights`).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch

__all__ = ["group_advantages", "kl_penalty", "token_weights", "grpo_token_loss", "selective_logprobs", "Normalization", "KLEstimator"]

Normalization = Literal["group_tokens", "sequence_mean", "token_mean", "constant"]
KLEstimator = Literal["k1", "k2", "k3"]


def group_advantages(rewards: Sequence[float], *, scale: bool = True, eps: float = 1e-6) -> list[float]:
    """``(R - mean) / (std + eps)`` within one group (``std`` unbiased, as torch.std); without
    ``scale``: ``R - mean`` (Dr. GRPO). A group whose rewards are all equal gets all zeros."""
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    centred = [r - mean for r in rewards]
    if all(abs(c) < 1e-12 for c in centred):
        return [0.0] * n
    if not scale:
        return centred
    std = math.sqrt(sum(c * c for c in centred) / (n - 1)) if n > 1 else 0.0
    return [c / (std + eps) for c in centred]


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: KLEstimator = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) from the sampled token's log-probabilities.

    * ``k3`` (default, Schulman's unbiased low-variance estimator, as in GRPO/DeepSeekMath):
      ``exp(ref - logp) - (ref - logp) - 1``, never negative, zero where the policies agree;
    * ``k1``: ``logp - ref`` (unbiased, high variance, can be negative);
    * ``k2``: ``0.5 * (logp - ref)^2`` (biased, its gradient is that of the true KL's in expectation).
    """
    d = ref_logp - logp
    if estimator == "k3":
        return torch.exp(d) - d - 1.0
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d * d
    raise ValueError(f"unknown KL estimator {estimator!r}; use k1, k2 or k3")


def token_weights(
    masks: Sequence[torch.Tensor],
    groups: Sequence[int],
    mode: Normalization,
    *,
    total_groups: float | None = None,
    total_sequences: float | None = None,
    total_tokens: float | None = None,
    constant: float = 1024.0,
) -> list[torch.Tensor]:
    """Weights ``w`` such that the batch loss is ``sum(w * l)``.

    ``masks`` are the per-sequence agent-token masks, ``groups`` the group index of each
    sequence. The totals default to what this batch holds; in a distributed step they are the
    totals over every process, so that the sum of every process's loss is the global loss.

    * ``group_tokens`` (paper Eq. 1): each group's token sum divided by the group's token count,
      then the mean over groups: ``w = 1 / (T_g * G)``;
    * ``sequence_mean`` (the original GRPO): each sequence's token mean, then the mean over
      sequences: ``w = 1 / (|tau| * N)``;
    * ``token_mean`` (DAPO): every agent token of the batch weighs the same: ``w = 1 / T``;
    * ``constant`` (Dr. GRPO): ``w = 1 / (N * constant)``, with no dependence on lengths.
    """
    lengths = [float(m.sum()) for m in masks]
    n_groups = total_groups if total_groups is not None else float(len(set(groups)))
    n_seq = total_sequences if total_sequences is not None else float(len(masks))
    n_tok = total_tokens if total_tokens is not None else float(sum(lengths))
    group_tokens: dict[int, float] = {}
    for g, n in zip(groups, lengths):
        group_tokens[g] = group_tokens.get(g, 0.0) + n
    out: list[torch.Tensor] = []
    for m, g, n in zip(masks, groups, lengths):
        m = m.float()
        if n == 0:
            out.append(torch.zeros_like(m))
        elif mode == "group_tokens":
            out.append(m / (group_tokens[g] * n_groups))
        elif mode == "sequence_mean":
            out.append(m / (n * n_seq))
        elif mode == "token_mean":
            out.append(m / n_tok)
        elif mode == "constant":
            out.append(m / (n_seq * constant))
        else:
            raise ValueError(f"unknown loss normalisation {mode!r}")
    return out


def grpo_token_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,
    kl_estimator: KLEstimator = "k3",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``sum(w * l)`` for one padded batch, and detached per-batch sums for metrics.

    ``logp``, ``old_logp``, ``weights`` (and ``ref_logp``) are ``[B, L]``; ``advantages`` is
    ``[B]`` or ``[B, L]``. Tokens with zero weight (prompt, observations, padding) contribute
    nothing. The log-ratio is clamped to [-20, 20] so that one wild token cannot overflow.
    """
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    mask = (weights != 0).float()
    log_ratio = torch.clamp(logp - old_logp, -20.0, 20.0) * mask
    ratio = torch.exp(log_ratio)
    clipped_ratio = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    surrogate = torch.minimum(ratio * advantages, clipped_ratio * advantages)
    per_token = -surrogate
    kl = torch.zeros_like(logp)
    if beta != 0.0:
        if ref_logp is None:
            raise ValueError("beta != 0 needs the reference log-probabilities")
        kl = kl_penalty(logp, ref_logp, kl_estimator) * mask
        per_token = per_token + beta * kl
    loss = (weights * per_token).sum()
    with torch.no_grad():
        # A token is clipped when the clipped branch wins the min and has no gradient.
        low = (ratio < 1.0 - clip_low) & (advantages < 0)
        high = (ratio > 1.0 + clip_high) & (advantages > 0)
        stats = {
            "tokens": mask.sum(),
            "clipped_low": (low.float() * mask).sum(),
            "clipped_high": (high.float() * mask).sum(),
            "ratio_sum": (ratio * mask).sum(),
            "kl_sum": (kl * mask).sum(),
            "pg_weighted": (weights * -surrogate).sum(),
            "kl_weighted": (weights * kl).sum(),
        }
    return loss, stats


def selective_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)[targets]`` in float32 without materialising the full log-softmax
    twice: the gathered logit minus the row's logsumexp."""
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)
