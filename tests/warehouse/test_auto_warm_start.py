"""``warm_start.steps: auto``: behaviour cloning stops when the held-aside seed conversations stop
getting reproduced more often, and "reproduced" means what a greedy rollout would do."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from coevolve_sdk.components.context import RunContext  # noqa: E402
from coevolve_sdk import EnvPool, RolloutConfig, collect_groups  # noqa: E402
from coevolve_grpo.algorithm import GRPO, AutoWarmStart, GRPOOptions, WarmStartOptions, _hold_aside  # noqa: E402
from coevolve_grpo.policies import TinyPolicy  # noqa: E402
from coevolve_warehouse.env import WarehouseEnv  # noqa: E402


def _setup(tmp_path: Path, steps, seed: int = 0, **auto):
    torch.set_num_threads(1)
    make = lambda: WarehouseEnv(max_steps=6, tool_docs="none", train_tasks=96)  # noqa: E731
    ctx = RunContext(run_dir=tmp_path, seed=seed, make_env=make, log=lambda m: None)
    policy = TinyPolicy(TinyPolicy.Options(hidden_size=64, layers=2, vocab_size=512, max_context=512), ctx)
    ctx.policy = policy
    alg = GRPO(GRPOOptions(beta=0.0, cpu=True, warm_start=WarmStartOptions(
        steps=steps, lr=3e-3, batch_size=16, auto=AutoWarmStart(**auto))), ctx)
    return ctx, policy, alg, make


@pytest.mark.slow
def test_auto_warm_start_stops_on_a_plateau_and_its_measure_is_what_greedy_rollouts_do(tmp_path: Path) -> None:
    ctx, policy, alg, make = _setup(tmp_path, "auto", check_every=50, patience=4, min_steps=50, max_steps=1500)
    tasks = make().tasks("train")
    m = alg.warm_start(tasks)
    # it learned something it was not trained on, and stopped by itself well before the bound
    assert m["warm_start_held_aside_turns"] > 0.3, m
    assert m["warm_start_steps_run"] < 1500, m
    assert m["warm_start_steps"] <= m["warm_start_steps_run"]
    assert m["warm_start_held_aside"] == round(0.15 * len(tasks))
    # the measure: a conversation counts as reproduced only if a greedy rollout repeats its
    # reference actions (a rollout can also reproduce it with other token boundaries, so the
    # teacher-forced count is never above the rollouts' count)
    probe = tasks[:32]
    share = alg.exact_match(policy.module, alg.warm_start_examples(probe))
    groups = collect_groups(policy, EnvPool(make), probe, RolloutConfig(group_size=1, max_new_tokens=40, temperature=0.0),
                            step=0, greedy=True)
    repeated = [g.trajectories[0] for g in groups]
    same = sum(1 for t, task in zip(repeated, probe) if [s.action.strip() for s in t.steps][: len(task.reference_actions)]
               == [a.strip() for a in task.reference_actions])
    assert 0 < share <= same / len(probe) + 1 / len(probe), (share, same)


def test_held_aside_conversations_follow_the_seed_and_keep_both_sides_non_empty() -> None:
    ex = [([i], [1]) for i in range(20)]
    a_train, a_held = _hold_aside(ex, 0.15, seed=0)
    b_train, b_held = _hold_aside(ex, 0.15, seed=0)
    c_train, c_held = _hold_aside(ex, 0.15, seed=1)
    assert a_held == b_held and a_held != c_held
    assert len(a_held) == 3 and sorted(a_train + a_held) == sorted(ex)
    assert _hold_aside(ex[:2], 0.01, seed=0)[1] and _hold_aside(ex[:2], 0.99, seed=0)[0]


def test_a_fixed_step_count_still_trains_exactly_that_many_steps(tmp_path: Path) -> None:
    _, _, alg, make = _setup(tmp_path, 3)
    m = alg.warm_start(make().tasks("train")[:8])
    assert m["warm_start_steps"] == 3 and "warm_start_steps_run" not in m
