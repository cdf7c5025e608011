"""GRPO learns: a tiny model that cannot solve the task at the start solves it after training.

The pick-tool task rewards pressing one button out of six that the request does not name. A
warm start (behaviour cloning on one reference call per button) teaches the format and leaves
the choice near uniform, so the starting reward is about 1/6; only the reward signal can tell
the model which button is right. Everything runs through the core's ``collect_groups``.
"""

from __future__ import annotations

import pytest
import torch

from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
from coevolve_grpo.algorithm import GRPO, GRPOOptions, WarmStartOptions
from coevolve_grpo.policies import TinyPolicy
from coevolve_grpo.testing import PickToolEnv

from .conftest import make_context

MAX_STEPS = 50


def _mean_reward(policy, pool, task, n, seed) -> float:
    torch.manual_seed(seed)
    settings = RolloutConfig(group_size=n, max_new_tokens=24, temperature=0.9)
    groups = collect_groups(policy, pool, [task], settings, step=-1, seed=seed)
    return sum(groups[0].scores) / n


@pytest.mark.slow
def test_grpo_raises_reward_from_below_03_to_above_09(tmp_path):
    torch.manual_seed(0)
    ctx = make_context(tmp_path)
    policy = TinyPolicy(TinyPolicy.Options(seed=0), ctx)
    ctx.policy = policy
    alg = GRPO(
        GRPOOptions(lr=2e-3, beta=0.0, micro_batch_size=64, cpu=True, seed=0,
                    warm_start=WarmStartOptions(steps=100, lr=5e-3, batch_size=12)),
        ctx,
    )
    env = PickToolEnv()
    ws = alg.warm_start(env.tasks())
    assert ws["warm_start_loss_last"] < 0.3 * ws["warm_start_loss_first"]
    pool = EnvPool(lambda: PickToolEnv())
    task = env.target_task("press_blue")
    before = _mean_reward(policy, pool, task, 64, seed=10_000)
    assert before < 0.3, before
    settings = RolloutConfig(group_size=8, max_new_tokens=24, temperature=0.9)
    history = []
    for step in range(MAX_STEPS):
        groups = collect_groups(policy, pool, [task] * 8, settings, step, seed=step)
        metrics = alg.step(groups)
        history.append(metrics["reward_mean"])
        if len(history) >= 3 and sum(history[-3:]) / 3 >= 0.96:
            break
    after = _mean_reward(policy, pool, task, 128, seed=20_000)
    print(f"reward before {before:.3f} after {after:.3f} in {len(history)} steps: {[round(h, 2) for h in history]}")
    assert after > 0.9, (before, after, history)
