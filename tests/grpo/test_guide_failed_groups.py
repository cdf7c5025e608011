"""``guide_failed_groups``: a group in which no sample succeeded trains on the task's reference
actions in place of its last sample, so a task the agent never solves still moves the policy,
towards the reference. Off (the default), such a group carries no gradient at all."""

from __future__ import annotations

import pytest
import torch

from coevolve_sdk import EnvPool, RolloutConfig, collect_groups, format_tool_call
from coevolve_grpo.algorithm import GRPO, GRPOOptions
from coevolve_grpo.policies import TinyPolicy
from coevolve_grpo.testing import PickToolEnv

from .conftest import make_context


def _setup(tmp_path, guide: bool):
    ctx = make_context(tmp_path)
    policy = TinyPolicy(TinyPolicy.Options(seed=0), ctx)
    ctx.policy = policy
    alg = GRPO(GRPOOptions(lr=1e-3, beta=0.0, cpu=True, seed=0, guide_failed_groups=guide), ctx)
    return ctx, policy, alg


def _failed_group(policy, task):
    """Four samples of the untrained model: none presses the right button."""
    groups = collect_groups(policy, EnvPool(lambda: PickToolEnv()), [task], RolloutConfig(group_size=4, max_new_tokens=8),
                            step=0, seed=0)
    assert not any(t.success for t in groups[0].trajectories)
    return groups


def _reference_logprob(alg: GRPO, task) -> float:
    from coevolve_grpo.algorithm import _Seq

    ids, mask = alg.warm_start_examples([task])[0]
    seq = _Seq(ids, mask, [], 0.0, 0)
    alg._no_grad_logprobs(alg.model, [seq], "cur")
    m = torch.tensor(mask, dtype=torch.float32)
    m[0] = 0.0
    return float((seq.cur * m).sum())


def _weights(policy) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.module.parameters()]


def test_a_group_without_a_success_moves_the_policy_towards_the_reference(tmp_path) -> None:
    task = PickToolEnv().target_task("press_blue")
    _, policy, alg = _setup(tmp_path / "on", guide=True)
    groups = _failed_group(policy, task)
    before = _reference_logprob(alg, task)
    metrics = alg.step(groups)
    assert metrics["guided_groups"] == 1.0
    # the step's own statistics describe what was sampled, not the reference
    assert metrics["success_rate"] == 0.0 and metrics["equal_reward_frac"] == 1.0
    assert _reference_logprob(alg, task) > before + 0.1


def test_off_by_default_the_same_group_changes_nothing(tmp_path) -> None:
    assert GRPOOptions().guide_failed_groups is False
    task = PickToolEnv().target_task("press_blue")
    _, policy, alg = _setup(tmp_path / "off", guide=False)
    groups = _failed_group(policy, task)
    start = _weights(policy)
    metrics = alg.step(groups)
    assert "guided_groups" not in metrics
    assert all(torch.equal(a, b) for a, b in zip(start, _weights(policy))), "equal rewards must give no update"


def test_only_failed_groups_with_a_reference_that_succeeds_are_guided(tmp_path) -> None:
    env = PickToolEnv()
    _, policy, alg = _setup(tmp_path, guide=True)
    task = env.target_task("press_blue")
    group = _failed_group(policy, task)[0]
    assert alg._guide(group) is not None
    # a group with one success already has something to move towards
    solved = group.model_copy(update={"trajectories": [*group.trajectories[:-1],
                                                       group.trajectories[-1].model_copy(update={"success": True, "score": 1.0})]})
    assert alg._guide(solved) is None
    # no reference actions, or reference actions that do not solve the task: nothing to guide with
    bare = task.model_copy(update={"id": "no-reference", "reference_actions": []})
    assert alg._guide(group.model_copy(update={"task": bare})) is None
    wrong = task.model_copy(update={"id": "wrong-reference", "reference_actions": [format_tool_call("press_red", {})]})
    assert alg._guide(group.model_copy(update={"task": wrong})) is None


@pytest.mark.parametrize("guide", [True, False])
def test_a_group_size_and_the_trained_sequences_stay_the_same(tmp_path, guide: bool) -> None:
    """The reference replaces a sample rather than joining the group: both settings train as
    many sequences per group (equal compute)."""
    _, policy, alg = _setup(tmp_path, guide=guide)
    groups = _failed_group(policy, PickToolEnv().target_task("press_blue"))
    batches, stats = alg._sequences(groups)
    assert len(batches) == 1 and len(batches[0]) == 4
    assert stats["guided_groups"] == (1.0 if guide else 0.0)
    advantages = [s.adv for s in batches[0]]
    if guide:
        assert advantages[-1] > 0 and all(a < 0 for a in advantages[:-1])
    else:
        assert advantages == [0.0] * 4


def test_a_trainer_restored_from_a_checkpoint_guides_like_the_one_that_never_stopped(tmp_path) -> None:
    """The option keeps only derived data (each task's reference conversation, rebuilt on
    demand) and draws no random number, so a resumed run takes the same guided steps as the run
    that was never interrupted: same weights, bit for bit."""
    task = PickToolEnv().target_task("press_blue")
    _, policy, alg = _setup(tmp_path / "a", guide=True)
    groups = _failed_group(policy, task)
    alg.step(groups)
    alg.save(tmp_path / "checkpoint")
    uninterrupted = alg.step(groups)
    _, policy_b, alg_b = _setup(tmp_path / "b", guide=True)
    alg_b.load(tmp_path / "checkpoint")  # a fresh trainer: its cache of reference conversations is empty
    assert not alg_b._guides
    resumed = alg_b.step(groups)
    assert resumed["guided_groups"] == uninterrupted["guided_groups"] == 1.0
    assert resumed["loss"] == uninterrupted["loss"]
    assert all(torch.equal(a, b) for a, b in zip(_weights(policy), _weights(policy_b)))
