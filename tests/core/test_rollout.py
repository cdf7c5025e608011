"""Token accounting of the rollout loop: masks and logprobs line up with the tokens."""

from __future__ import annotations

from pathlib import Path

from coevolve_kvstore import KVStoreEnv
from coevolve_sdk.context import RunContext
from coevolve_sdk.rollout import EnvPool, RolloutSettings, collect_groups, evaluate
from tests.core.toy_plugin import OBS_TOKEN, MenuOptions, MenuPolicy


def test_groups_masks_and_logprobs(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: KVStoreEnv(max_steps=3))
    pol = MenuPolicy(MenuOptions(seed=0), ctx)
    tasks = KVStoreEnv().tasks()[:3]
    groups = collect_groups(pol, EnvPool(ctx.make_env), tasks, RolloutSettings(group_size=5), step=1)
    assert [g.task.id for g in groups] == [t.id for t in tasks]
    for g in groups:
        assert len(g.trajectories) == 5
        for tr in g.trajectories:
            ids, mask, lps = tr.token_ids, tr.loss_mask, tr.logprobs
            assert len(ids) == len(mask) == len(lps)
            assert mask[: tr.prompt_length] == [0] * tr.prompt_length
            # each agent turn is [action, eos] with mask 1; observations are OBS_TOKEN with mask 0
            for tok, m, lp in zip(ids, mask, lps):
                if tok == OBS_TOKEN:
                    assert m == 0 and lp == 0.0
                if m == 1 and tok != pol.eos_token_id:
                    assert lp < 0.0
            assert sum(mask) == 2 * tr.info["turns"]
            assert len(tr.steps) == tr.info["turns"]
            assert tr.action_pattern == ">".join(n for s in tr.steps for n in s.info.get("tool_names", []))


def test_greedy_evaluation_is_deterministic(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: KVStoreEnv(max_steps=3))
    pol = MenuPolicy(MenuOptions(seed=0), ctx)
    tasks = KVStoreEnv().tasks("test")
    a = evaluate(pol, EnvPool(ctx.make_env), tasks, RolloutSettings(), step=0)
    b = evaluate(pol, EnvPool(ctx.make_env), tasks, RolloutSettings(), step=0)
    assert [t.actions for t in a["trajectories"]] == [t.actions for t in b["trajectories"]]
