"""Shared set-up of the GRPO benchmarks: a tiny policy on the pick-tool environment."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def tiny_setup(hidden: int = 64, seed: int = 0) -> tuple[Any, Any, Any]:
    """(context, policy, environment) with the tokenizer trained on the pick-tool env."""
    from coevolve_sdk.components.context import RunContext
    from coevolve_grpo.policies import TinyPolicy
    from coevolve_grpo.testing import PickToolEnv

    ctx = RunContext(run_dir=Path("/tmp/coevolve-bench"), seed=seed, make_env=lambda: PickToolEnv(), log=lambda m: None)
    policy = TinyPolicy(TinyPolicy.Options(hidden_size=hidden, seed=seed), ctx)
    ctx.policy = policy
    return ctx, policy, PickToolEnv()


def timed(fn: Callable[[], Any], repeat: int, warmup: int = 1) -> tuple[list[float], Any]:
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def summary(times: list[float]) -> str:
    return f"best {min(times):.3f}s median {statistics.median(times):.3f}s (n={len(times)})"
