"""The warm-start cache: a run that finds the identical warm start cached loads it and ends up
with exactly the weights it would have computed; anything that changes the result misses."""

from __future__ import annotations

from pathlib import Path

import torch

from coevolve_grpo.algorithm import GRPO
from coevolve_grpo.testing import PickToolEnv

from .conftest import make_context, tiny_policy


def _warm(tmp: Path, tiny_dir: Path, cache: Path | None, seed: int = 0, steps: int = 6) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    ctx = make_context(tmp, max_steps=3, seed=seed)
    pol = tiny_policy(ctx, tiny_dir)
    algo = GRPO(GRPO.Options(beta=0.0, warm_start={"steps": steps, "lr": 3e-3, "batch_size": 4, "cache": str(cache) if cache else None}), ctx)
    metrics = algo.warm_start(PickToolEnv(max_steps=3).tasks("train"))
    return {k: v.detach().clone() for k, v in pol.module.state_dict().items()}, metrics


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_cached_warm_start_is_the_computed_one(tmp_path: Path, tiny_dir: Path) -> None:
    cache = tmp_path / "cache"
    plain, m0 = _warm(tmp_path / "a", tiny_dir, None)
    first, m1 = _warm(tmp_path / "b", tiny_dir, cache)
    assert "warm_start_cached" not in m1 and _same(plain, first)
    entries = [p for p in cache.iterdir() if p.is_dir()]
    assert len(entries) == 1 and {f.name for f in entries[0].iterdir()} == {"weights.safetensors", "metrics.json"}
    again, m2 = _warm(tmp_path / "c", tiny_dir, cache)
    assert m2["warm_start_cached"] == 1.0 and m2["warm_start_loss_last"] == m1["warm_start_loss_last"]
    assert _same(plain, again)


def test_anything_that_changes_the_result_misses(tmp_path: Path, tiny_dir: Path) -> None:
    cache = tmp_path / "cache"
    _warm(tmp_path / "a", tiny_dir, cache)
    _, other_seed = _warm(tmp_path / "b", tiny_dir, cache, seed=1)
    _, other_steps = _warm(tmp_path / "c", tiny_dir, cache, steps=7)
    assert "warm_start_cached" not in other_seed and "warm_start_cached" not in other_steps
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 3


def test_another_thread_count_misses(tmp_path: Path, tiny_dir: Path) -> None:
    # two threads round differently from one: `make demo` (two threads) and an experiment's runs
    # (one each) in the same folder must not share a warm start through the cache
    cache = tmp_path / "cache"
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _warm(tmp_path / "a", tiny_dir, cache)
        torch.set_num_threads(2)
        _, two = _warm(tmp_path / "b", tiny_dir, cache)
        torch.set_num_threads(1)
        _, one_again = _warm(tmp_path / "c", tiny_dir, cache)
    finally:
        torch.set_num_threads(before)
    assert "warm_start_cached" not in two and one_again["warm_start_cached"] == 1.0
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2
