"""How the warm start lays its conversations out for the model, so that it computes on almost
no padding.

The warm start's batch is a handful of replayed conversations of very different lengths (BFCL:
600 to 1,750 tokens). Padding them all to the longest wasted about a third of the compute.
Two layouts avoid that; both keep the loss exactly what it was (the token mean over the batch's
agent tokens: each micro-batch's sum is divided by the batch's total):

* ``buckets`` (the default): the batch sorted by length and cut into micro-batches whose
  padded size (rows x longest row) stays within ``micro_batch_tokens``; each micro-batch is
  right-padded (causal attention never lets a real token see the padding, so no padding mask
  is needed and attention keeps its fused path). With a budget below two conversations every
  conversation is its own forward: no padding at all.
* ``packed``: conversations concatenated into rows of at most ``micro_batch_tokens`` tokens,
  position ids restarting at each conversation. Transformers then keeps attention inside each
  conversation: with a variable-length kernel (``flash_attention_2``) at no extra cost, with
  sdpa or eager through a block-diagonal mask that still computes the masked-out blocks.

Measured on this machine's CPU with the tiny model (``bench/warm_start.py``), ``buckets`` is the
fast one there; ``packed`` pays off only where a variable-length attention kernel exists (GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Example", "MicroBatch", "Layout", "sample_batches", "micro_batches"]

#: A conversation: token ids and the loss mask (1 on the agent's tokens).
Example = tuple[list[int], list[int]]
Layout = Literal["buckets", "packed"]


@dataclass
class MicroBatch:
    """One forward/backward: rows of token ids with their loss masks (the first token of every
    conversation masked: it has no prediction) and, when conversations are packed, position ids
    that restart at each conversation."""

    ids: list[list[int]]
    mask: list[list[int]]
    positions: list[list[int]] | None = None

    @property
    def tokens(self) -> int:
        """Real tokens (padding excluded)."""
        return sum(len(r) for r in self.ids)


def sample_batches(n_examples: int, steps: int, batch_size: int, seed: int) -> list[list[int]]:
    """The warm start's draws: ``batch_size`` example indices per step, with replacement, from a
    generator seeded with ``seed`` alone (the same on every run and process)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(n_examples, (batch_size,), generator=gen).tolist() for _ in range(steps)]


def _masked(mask: list[int]) -> list[int]:
    return [0] + list(mask[1:])


def micro_batches(batch: list[Example], layout: Layout, tokens: int) -> list[MicroBatch]:
    """Split one optimiser step's conversations into micro-batches of at most ``tokens`` tokens
    (a longer conversation gets one of its own)."""
    if layout == "buckets":
        order = sorted(batch, key=lambda e: len(e[0]))
        out: list[MicroBatch] = []
        cur: list[Example] = []
        for ex in order:  # ascending: the newcomer is the longest row of the micro-batch
            if cur and (len(cur) + 1) * len(ex[0]) > tokens:
                out.append(MicroBatch([list(i) for i, _ in cur], [_masked(m) for _, m in cur]))
                cur = []
            cur.append(ex)
        if cur:
            out.append(MicroBatch([list(i) for i, _ in cur], [_masked(m) for _, m in cur]))
        return out
    if layout == "packed":
        rows: list[list[Example]] = []
        sizes: list[int] = []
        for ex in sorted(batch, key=lambda e: -len(e[0])):  # first fit, longest first
            for r, size in enumerate(sizes):
                if size + len(ex[0]) <= tokens:
                    rows[r].append(ex)
                    sizes[r] += len(ex[0])
                    break
            else:
                rows.append([ex])
                sizes.append(len(ex[0]))
        return [
            MicroBatch(
                [[t for i, _ in row for t in i]],
                [[v for _, m in row for v in _masked(m)]],
                [[p for i, _ in row for p in range(len(i))]],
            )
            for row in rows
        ]
    raise ValueError(f"unknown warm start layout {layout!r}; use 'buckets' or 'packed'")
