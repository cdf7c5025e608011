"""The GRPO update against a per-token reference computation, and checkpoint round trips."""

from __future__ import annotations

import math
import random

import pytest
import torch

from coevolve_sdk.records import RolloutGroup, Task, Trajectory
from coevolve_grpo.algorithm import GRPO, GRPOOptions

from .conftest import make_context, tiny_policy


def _random_groups(vocab: int, seed: int = 0, n_groups: int = 4, k: int = 3) -> list[RolloutGroup]:
    """Several groups of padded-length sequences: a prompt, then agent and observation segments,
    mixed rewards (and one group whose rewards are all equal)."""
    rnd = random.Random(seed)
    groups = []
    for gi in range(n_groups):
        task = Task(id=f"t{gi}", env="pick-tool", query="q")
        trajs = []
        for j in range(k):
            prompt = rnd.randint(3, 9)
            ids = [rnd.randrange(10, vocab) for _ in range(prompt)]
            mask = [0] * prompt
            for _ in range(rnd.randint(1, 3)):
                a = rnd.randint(1, 6)
                ids += [rnd.randrange(10, vocab) for _ in range(a)]
                mask += [1] * a
                o = rnd.randint(0, 4)
                ids += [rnd.randrange(10, vocab) for _ in range(o)]
                mask += [0] * o
            score = 1.0 if gi == n_groups - 1 else rnd.choice([0.0, 0.5, 1.0])
            trajs.append(Trajectory(task_id=task.id, token_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids), score=score, prompt_length=prompt))
        if gi == 0:  # make sure at least one group has mixed rewards
            trajs[0].score, trajs[1].score = 0.0, 1.0
        groups.append(RolloutGroup(task=task, step=0, trajectories=trajs))
    return groups


def _token_logprobs(model, ids: list[int]) -> torch.Tensor:
    logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def _reference_loss(model, ref_model, groups, o: GRPOOptions) -> torch.Tensor:
    """Per trajectory, unpadded; per token, scalar arithmetic; written from Eq. 1 directly."""
    seqs = []
    for gi, g in enumerate(groups):
        rewards = [t.score for t in g.trajectories]
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
        for t, r in zip(g.trajectories, rewards):
            adv = 0.0 if std == 0 else ((r - mean) / (std + o.advantage_eps) if o.scale_advantages else r - mean)
            seqs.append((gi, t, adv))
    n_groups = len(groups)
    n_seq = len(seqs)
    n_tok = sum(sum(t.loss_mask[1:]) for _, t, _ in seqs)
    group_tok = {gi: sum(sum(t.loss_mask[1:]) for g2, t, _ in seqs if g2 == gi) for gi in range(n_groups)}
    total = torch.zeros(())
    for gi, t, adv in seqs:
        lsm = _token_logprobs(model, t.token_ids)
        with torch.no_grad():
            ref_lsm = _token_logprobs(ref_model, t.token_ids)
        n_i = sum(t.loss_mask[1:])
        for pos in range(1, len(t.token_ids)):
            if not t.loss_mask[pos]:
                continue
            lp = lsm[pos - 1, t.token_ids[pos]]
            ratio = torch.exp(lp - t.logprobs[pos])
            clipped = torch.clamp(ratio, 1 - o.clip_low, 1 + o.clip_high)
            term = -torch.minimum(ratio * adv, clipped * adv)
            d = ref_lsm[pos - 1, t.token_ids[pos]] - lp
            term = term + o.beta * (torch.exp(d) - d - 1)
            if o.loss_norm == "group_tokens":
                total = total + term / (group_tok[gi] * n_groups)
            elif o.loss_norm == "sequence_mean":
                total = total + term / (n_i * n_seq)
            elif o.loss_norm == "token_mean":
                total = total + term / n_tok
            else:
                total = total + term / (n_seq * o.norm_constant)
    return total


@pytest.mark.parametrize("loss_norm", ["group_tokens", "sequence_mean", "token_mean", "constant"])
def test_loss_and_gradient_match_a_per_token_loop(tmp_path, tiny_dir, loss_norm):
    ctx = make_context(tmp_path)
    pol = tiny_policy(ctx, tiny_dir)
    o = GRPOOptions(lr=1e-3, beta=0.05, loss_norm=loss_norm, norm_constant=12.0, micro_batch_size=4, cpu=True)
    alg = GRPO(o, ctx)
    model = pol.model
    # Move the policy away from the reference, and give pi_old some spread so that some ratios
    # leave the clip band on both sides.
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    groups = _random_groups(len(pol.tokenizer))
    rnd = random.Random(1)
    with torch.no_grad():
        for grp in groups:
            for t in grp.trajectories:
                lsm = _token_logprobs(model, t.token_ids)
                t.logprobs = [0.0] + [
                    float(lsm[i - 1, t.token_ids[i]]) + (rnd.uniform(-0.6, 0.6) if t.loss_mask[i] else 0.0)
                    for i in range(1, len(t.token_ids))
                ]
                t.logprobs = [lp if m else 0.0 for lp, m in zip(t.logprobs, t.loss_mask)]
    loss = alg.loss_and_grad(groups)
    got = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    expect = _reference_loss(model, alg.ref_model, groups, o)
    expect.backward()
    assert loss == pytest.approx(float(expect.detach()), abs=1e-5)
    assert got, "no gradient reached the model"
    for n, p in model.named_parameters():
        assert torch.allclose(got[n], p.grad, atol=1e-5, rtol=1e-4), n
    # The batch really exercises both clip sides and padding.
    assert len({len(t.token_ids) for grp in groups for t in grp.trajectories}) > 3
    # ... through the short way (the output layer on the agent's tokens only), for the trained
    # model and for the KL reference alike
    assert alg._scored_rows_ok == {type(model): True}


def test_step_reports_equal_groups_clipping_and_zero_kl_at_start(tmp_path, tiny_dir):
    ctx = make_context(tmp_path)
    pol = tiny_policy(ctx, tiny_dir)
    alg = GRPO(GRPOOptions(lr=1e-3, beta=0.1, cpu=True), ctx)
    groups = _random_groups(len(pol.tokenizer), seed=3)
    # On-policy logprobs: ratio 1, nothing clipped, KL zero (policy == reference before the update).
    with torch.no_grad():
        for grp in groups:
            for t in grp.trajectories:
                lsm = _token_logprobs(pol.model, t.token_ids)
                t.logprobs = [0.0] + [float(lsm[i - 1, t.token_ids[i]]) if t.loss_mask[i] else 0.0 for i in range(1, len(t.token_ids))]
    before = [p.detach().clone() for p in pol.model.parameters()]
    m = alg.step(groups)
    assert m["equal_reward_groups"] >= 1 and m["groups"] == 4
    assert m["kl"] == pytest.approx(0.0, abs=1e-7)
    assert m["clip_frac"] == 0.0
    assert m["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert m["logprob_mismatch_mean"] < 1e-5
    assert any(not torch.equal(a, b) for a, b in zip(before, pol.model.parameters()))
    # A second step on the now-stale logprobs moves the ratio and the KL away from the start.
    m2 = alg.step(groups)
    assert m2["kl"] > 0 and abs(m2["ratio_mean"] - 1.0) > 1e-6


def test_groups_with_equal_rewards_carry_no_policy_gradient(tmp_path, tiny_dir):
    ctx = make_context(tmp_path)
    pol = tiny_policy(ctx, tiny_dir)
    alg = GRPO(GRPOOptions(lr=1e-3, beta=0.0, cpu=True), ctx)
    groups = _random_groups(len(pol.tokenizer), seed=5)
    for grp in groups:
        for t in grp.trajectories:
            t.score = 1.0
    alg.loss_and_grad(groups)
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in pol.model.parameters())


def test_drop_equal_groups_updates_as_if_the_flat_groups_were_never_rolled_out(tmp_path, tiny_dir):
    """drop_equal_groups (DAPO's filter) leaves flat groups out of the update entirely, so they
    no longer dilute the per-group mean of the loss: the step equals one on the other groups
    alone, while the metrics still count every group that was rolled out."""
    groups = _random_groups(300, seed=11)
    assert max(t.score for t in groups[-1].trajectories) == min(t.score for t in groups[-1].trajectories)
    informative = [g for g in groups if len({t.score for t in g.trajectories}) > 1]
    assert 0 < len(informative) < len(groups)
    after = {}
    for name, drop, batch in (("drop", True, groups), ("only", False, informative), ("keep", False, groups)):
        ctx = make_context(tmp_path / name)
        pol = tiny_policy(ctx, tiny_dir)
        alg = GRPO(GRPOOptions(lr=1e-2, beta=0.0, drop_equal_groups=drop, cpu=True), ctx)
        m = alg.step(batch)
        after[name] = ([p.detach().clone() for p in pol.model.parameters()], m)
    (p_drop, m_drop), (p_only, m_only), (p_keep, _) = after["drop"], after["only"], after["keep"]
    for a, b in zip(p_drop, p_only):
        assert torch.allclose(a, b, atol=1e-7)
    assert any(not torch.allclose(a, b, atol=1e-7) for a, b in zip(p_drop, p_keep))
    assert m_drop["groups"] == len(groups) and m_drop["equal_reward_groups"] == len(groups) - len(informative)
    assert m_drop["trained_tokens"] == m_only["trained_tokens"]


def _train(tmp_path, tiny_dir, steps, groups, save_at=None, load_from=None):
    ctx = make_context(tmp_path)
    pol = tiny_policy(ctx, tiny_dir)
    alg = GRPO(GRPOOptions(lr=1e-2, beta=0.01, epochs=2, mini_batches=2, micro_batch_size=3, lr_schedule="cosine", warmup_steps=1, total_steps=6, cpu=True), ctx)
    if load_from is not None:
        alg.load(load_from)
    for s in range(steps):
        alg.step(groups)
        if save_at is not None and s + 1 == save_at:
            alg.save(tmp_path / "ck" / "algorithm")
    return alg


def test_save_load_continues_exactly_like_an_uninterrupted_run(tmp_path, tiny_dir):
    from transformers import AutoModelForCausalLM

    groups = _random_groups(300, seed=9)
    full = _train(tmp_path / "a", tiny_dir, 4, groups)
    half = _train(tmp_path / "b", tiny_dir, 2, groups, save_at=2)
    resumed = _train(tmp_path / "c", tiny_dir, 2, groups, load_from=tmp_path / "b" / "ck" / "algorithm")
    # The optimiser state after loading equals the saved one.
    fresh = _train(tmp_path / "d", tiny_dir, 0, groups, load_from=tmp_path / "b" / "ck" / "algorithm")
    sd_a, sd_b = half.optimizer.state_dict(), fresh.optimizer.state_dict()
    for k, st in sd_a["state"].items():
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(torch.as_tensor(st[name]), torch.as_tensor(sd_b["state"][k][name]))
    assert fresh.scheduler.last_epoch == half.scheduler.last_epoch == 2
    assert fresh.counters.step == 2
    for p, q in zip(full.model.parameters(), resumed.model.parameters()):
        assert torch.equal(p, q)
    # The checkpoint's policy folder (beside algorithm/) opens with the Auto classes.
    m = AutoModelForCausalLM.from_pretrained(tmp_path / "b" / "ck" / "policy")
    for (n, p), q in zip(m.named_parameters(), half.model.parameters()):
        assert torch.equal(p, q), n


def test_warm_start_masks_only_the_reference_actions(tmp_path, tiny_dir):
    from coevolve_grpo.algorithm import WarmStartOptions
    from coevolve_grpo.testing import PickToolEnv

    ctx = make_context(tmp_path, max_steps=3)
    pol = tiny_policy(ctx, tiny_dir)
    alg = GRPO(GRPOOptions(beta=0.0, cpu=True, warm_start=WarmStartOptions(steps=3, lr=1e-3, batch_size=4)), ctx)
    env = PickToolEnv(max_steps=3)
    task = env.tasks()[0].model_copy(update={"reference_actions": [env.tasks()[1].reference_actions[0], env.tasks()[0].reference_actions[0]]})
    (ids, mask), = alg.warm_start_examples([task])
    agent = pol.decode([t for t, m in zip(ids, mask) if m])
    assert agent == task.reference_actions[0] + "<|im_end|>" + task.reference_actions[1] + "<|im_end|>"
    # The whole example is what the template renders for the replayed conversation.
    msgs = env.reset(options={"task": task})[1]["messages"] + [
        {"role": "assistant", "content": task.reference_actions[0]},
        {"role": "tool", "content": "click. nothing happened"},
        {"role": "assistant", "content": task.reference_actions[1]},
    ]
    assert pol.decode(ids) + "\n" == pol.render(msgs, [t.as_openai() for t in env.tools()], add_generation_prompt=False)
    m = alg.warm_start([task])
    assert m["warm_start_steps"] == 3 and m["warm_start_examples"] == 1


def test_mismatch_metric_compares_pre_update_logprobs_in_both_modes(tmp_path, tiny_dir):
    """The rollout/training log-prob mismatch measures how far the trainer's log-probabilities
    of the sampled tokens are from those recorded at sampling time, before any update. With
    ``old_logprobs: recompute`` and several mini-batches it must not be measured against
    weights that earlier mini-batches of the same step already moved."""
    results = {}
    for mode in ("recorded", "recompute"):
        ctx = make_context(tmp_path / mode)
        pol = tiny_policy(ctx, tiny_dir)
        alg = GRPO(GRPOOptions(lr=2e-2, beta=0.0, mini_batches=4, micro_batch_size=3, old_logprobs=mode, cpu=True), ctx)
        groups = _random_groups(len(pol.tokenizer), seed=11, n_groups=8)
        with torch.no_grad():  # fresh data: recorded by the very weights that train on it
            for grp in groups:
                for t in grp.trajectories:
                    lsm = _token_logprobs(pol.model, t.token_ids)
                    t.logprobs = [0.0] + [float(lsm[i - 1, t.token_ids[i]]) if t.loss_mask[i] else 0.0 for i in range(1, len(t.token_ids))]
        results[mode] = alg.step(groups)
        # the step really moved the policy away from the recorded log-probabilities
        with torch.no_grad():
            t = groups[0].trajectories[0]
            lsm = _token_logprobs(pol.model, t.token_ids)
            moved = max(abs(float(lsm[i - 1, t.token_ids[i]]) - t.logprobs[i]) for i in range(1, len(t.token_ids)) if t.loss_mask[i])
        assert moved > 1e-3, (mode, moved)
    for mode, m in results.items():
        assert m["logprob_mismatch_mean"] < 1e-5, (mode, m["logprob_mismatch_mean"])
        assert m["logprob_mismatch_max"] < 1e-4, (mode, m["logprob_mismatch_max"])
