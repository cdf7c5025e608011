"""The GRPO arithmetic against per-token computations written out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coevolve_grpo.losses import group_advantages, grpo_token_loss, kl_penalty, token_weights


@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=2, max_size=10))
@settings(max_examples=60, deadline=None)
def test_advantages_are_standardised_per_group(rewards):
    adv = group_advantages(rewards)
    mean = sum(rewards) / len(rewards)
    if len(set(rewards)) == 1:
        assert adv == [0.0] * len(rewards)
        return
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
    for r, a in zip(rewards, adv):
        assert a == pytest.approx((r - mean) / (std + 1e-6), abs=1e-9)
    assert sum(adv) == pytest.approx(0.0, abs=1e-9)
    # Without std scaling only the mean is removed (Dr. GRPO).
    assert group_advantages(rewards, scale=False) == pytest.approx([r - mean for r in rewards])


def test_clipping_engages_exactly_outside_the_band_with_the_advantage_sign():
    clip_low, clip_high = 0.2, 0.28
    ratios = [0.5, 0.79, 0.81, 1.0, 1.2, 1.27, 1.29, 2.0]
    for sign in (1.0, -1.0):
        old = torch.zeros(1, len(ratios))
        logp = torch.tensor([[math.log(r) for r in ratios]], requires_grad=True)
        adv = torch.tensor([sign])
        w = torch.ones(1, len(ratios))
        loss, stats = grpo_token_loss(logp, old, adv, w, clip_low=clip_low, clip_high=clip_high)
        loss.backward()
        grad = logp.grad[0]
        for i, r in enumerate(ratios):
            clipped = (sign > 0 and r > 1 + clip_high) or (sign < 0 and r < 1 - clip_low)
            if clipped:
                assert grad[i] == 0.0, (sign, r)
            else:
                # d(-r*A)/dlogp = -r*A: the unclipped branch is active.
                assert grad[i].item() == pytest.approx(-r * sign, rel=1e-6), (sign, r)
        expect_low = sum(1 for r in ratios if sign < 0 and r < 1 - clip_low)
        expect_high = sum(1 for r in ratios if sign > 0 and r > 1 + clip_high)
        assert stats["clipped_low"].item() == expect_low
        assert stats["clipped_high"].item() == expect_high


def test_kl_is_zero_when_policy_equals_reference_and_positive_otherwise():
    lp = torch.randn(4, 7)
    for est in ("k1", "k2", "k3"):
        assert torch.equal(kl_penalty(lp, lp.clone(), est), torch.zeros_like(lp))
    other = lp + torch.randn(4, 7)
    assert bool((kl_penalty(lp, other, "k3") > 0).all())
    # k3 is an unbiased estimator of KL(p||q): check on a small categorical by enumeration.
    p = torch.softmax(torch.randn(5), 0)
    q = torch.softmax(torch.randn(5), 0)
    exact = float((p * (p.log() - q.log())).sum())
    expectation = float((p * kl_penalty(p.log(), q.log(), "k3")).sum())
    assert expectation == pytest.approx(exact, rel=1e-5)


def _loop_loss(lps, olds, advs, masks, groups, mode, beta=0.0, refs=None, constant=16.0, cl=0.2, ch=0.28):
    """The obviously-correct version: one token at a time."""
    group_ids = sorted(set(groups))
    n_seq = len(lps)
    n_tok = sum(float(m.sum()) for m in masks)
    total = 0.0
    for g in group_ids:
        members = [i for i in range(n_seq) if groups[i] == g]
        t_g = sum(float(masks[i].sum()) for i in members)
        for i in members:
            n_i = float(masks[i].sum())
            for t in range(len(lps[i])):
                if masks[i][t] == 0:
                    continue
                r = math.exp(lps[i][t] - olds[i][t])
                a = advs[i]
                surr = min(r * a, min(max(r, 1 - cl), 1 + ch) * a)
                term = -surr
                if beta:
                    d = refs[i][t] - lps[i][t]
                    term += beta * (math.exp(d) - d - 1)
                if mode == "group_tokens":
                    total += term / (t_g * len(group_ids))
                elif mode == "sequence_mean":
                    total += term / (n_i * n_seq)
                elif mode == "token_mean":
                    total += term / n_tok
                else:
                    total += term / (n_seq * constant)
    return total


@pytest.mark.parametrize("mode", ["group_tokens", "sequence_mean", "token_mean", "constant"])
def test_normalisations_match_the_token_loop(mode):
    g = torch.Generator().manual_seed(3)
    lengths = [5, 9, 3, 7, 6, 8]
    groups = [0, 0, 1, 1, 2, 2]
    masks = [(torch.rand(n, generator=g) > 0.3).float() for n in lengths]
    lps = [-torch.rand(n, generator=g) * 3 for n in lengths]
    olds = [lp + 0.4 * torch.randn(n, generator=g) for lp, n in zip(lps, lengths)]
    refs = [lp + 0.2 * torch.randn(n, generator=g) for lp, n in zip(lps, lengths)]
    advs = [1.0, -1.0, 0.5, -0.5, 0.0, 0.0]
    w = token_weights(masks, groups, mode, constant=16.0)
    width = max(lengths)

    def pad(xs):
        out = torch.zeros(len(xs), width)
        for i, x in enumerate(xs):
            out[i, : len(x)] = x
        return out

    loss, _ = grpo_token_loss(pad(lps), pad(olds), torch.tensor(advs), pad(w), beta=0.05, ref_logp=pad(refs))
    expect = _loop_loss([x.tolist() for x in lps], [x.tolist() for x in olds], advs, masks, groups, mode, beta=0.05,
                        refs=[x.tolist() for x in refs])
    assert loss.item() == pytest.approx(expect, abs=1e-6)
