"""The warm start's layouts (length buckets, packed rows) change how conversations are batched,
never the loss: the same loss and the same gradient as each conversation on its own."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coevolve_grpo.algorithm import GRPO, GRPOOptions, WarmStartOptions
from coevolve_grpo.packing import micro_batches

from .conftest import make_context, tiny_policy


def _examples(vocab: int, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """Conversations of very different lengths: a prompt, then agent and observation turns."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        prompt = rnd.randint(2, 30)
        ids = [rnd.randrange(10, vocab) for _ in range(prompt)]
        mask = [0] * prompt
        for _ in range(rnd.randint(1, 4)):
            a, o = rnd.randint(1, 12), rnd.randint(0, 15)
            ids += [rnd.randrange(10, vocab) for _ in range(a + o)]
            mask += [1] * a + [0] * o
        out.append((ids, mask))
    return out


def _reference(model, batch) -> torch.Tensor:
    """Each conversation alone, unpadded, log-softmax over the vocabulary: the loss by definition."""
    n_tok = sum(sum(m[1:]) for _, m in batch)
    total = torch.zeros(())
    for ids, mask in batch:
        lsm = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
        for t in range(1, len(ids)):
            if mask[t]:
                total = total - lsm[t - 1, ids[t]] / n_tok
    return total


@pytest.mark.parametrize(
    "layout,tokens,forwards",
    [("buckets", 100_000, 1), ("buckets", 1, 9), ("buckets", 150, None), ("packed", 100_000, 1), ("packed", 120, None)],
    ids=["one-padded-batch", "one-each", "buckets", "one-packed-row", "packed-rows"],
)
def test_layouts_give_the_loss_and_gradient_of_each_conversation_alone(tmp_path, tiny_dir, layout, tokens, forwards):
    ctx = make_context(tmp_path)
    pol = tiny_policy(ctx, tiny_dir)
    alg = GRPO(GRPOOptions(beta=0.0, cpu=True, warm_start=WarmStartOptions(layout=layout, micro_batch_tokens=tokens)), ctx)
    model = pol.model
    batch = _examples(len(pol.tokenizer), 8, seed=3)
    batch.append(batch[2])  # a batch draws with replacement
    parts = micro_batches(batch, layout, tokens)
    if forwards is not None:
        assert len(parts) == forwards
    else:
        assert 1 < len(parts) < len(batch)
    model.zero_grad(set_to_none=True)
    loss, n_tok, n_in = alg.sft_backward(model, batch)
    got = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    expect = _reference(model, batch)
    expect.backward()
    assert n_tok == sum(sum(m[1:]) for _, m in batch) and n_in == sum(len(i) for i, _ in batch)
    assert loss == pytest.approx(float(expect.detach()), abs=1e-5)
    for n, p in model.named_parameters():
        assert torch.allclose(got[n], p.grad, atol=1e-6, rtol=1e-4), n
    # ... and the tiny model took the short way: the output layer on the scored rows only
    assert alg._scored_rows_ok == {type(model): True}


def test_a_model_whose_forward_changes_the_logits_keeps_the_full_forward(tmp_path, tiny_dir) -> None:
    """The output layer on the scored rows alone is what the model's forward gives only when the
    forward adds nothing after it; a model that scales its logits (as some architectures do) must
    get the loss of its own forward, not of its decoder and output layer taken apart."""
    ctx = make_context(tmp_path)
    pol = tiny_policy(ctx, tiny_dir)
    alg = GRPO(GRPOOptions(beta=0.0, cpu=True), ctx)
    model = pol.model
    plain = model.forward

    def scaled(*args, **kwargs):
        out = plain(*args, **kwargs)
        out.logits = out.logits * 0.5
        return out

    model.forward = scaled
    # a first batch with nothing to score decides nothing
    silent = [(ids, [0] * len(mask)) for ids, mask in _examples(len(pol.tokenizer), 2, seed=4)]
    alg.sft_backward(model, silent)
    assert alg._scored_rows_ok == {}
    batch = _examples(len(pol.tokenizer), 6, seed=5)
    model.zero_grad(set_to_none=True)
    loss, _, _ = alg.sft_backward(model, batch)
    assert alg._scored_rows_ok == {type(model): False}
    model.zero_grad(set_to_none=True)
    expect = _reference(model, batch)
    assert loss == pytest.approx(float(expect.detach()), abs=1e-5)


@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    layout=st.sampled_from(["buckets", "packed"]),
    tokens=st.integers(1, 120),
)
def test_micro_batches_hold_every_conversation_once_within_the_budget(lengths, layout, tokens):
    batch = [([100 * i + t for t in range(n)], [t % 2 for t in range(n)]) for i, n in enumerate(lengths)]
    parts = micro_batches(batch, layout, tokens)
    seen = []
    for mb in parts:
        width = max(len(r) for r in mb.ids)
        if mb.positions is None:  # buckets: within the budget, or one conversation alone
            assert len(mb.ids) * width <= tokens or len(mb.ids) == 1
            for r, row in enumerate(mb.ids):
                seen.append(row)
                assert mb.mask[r][0] == 0
        else:  # packed: one row, within the budget or one conversation alone
            assert len(mb.ids) == 1
            row, pos, mask = mb.ids[0], mb.positions[0], mb.mask[0]
            starts = [k for k, p in enumerate(pos) if p == 0]  # position ids restart at each conversation
            assert len(row) <= tokens or starts == [0]
            for a, b in zip(starts, starts[1:] + [len(row)]):
                seen.append(row[a:b])
                assert mask[a] == 0 and pos[a:b] == list(range(b - a))
    assert sorted(seen) == sorted(i for i, _ in batch)
