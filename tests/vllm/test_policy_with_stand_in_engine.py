"""The ``vllm`` policy end to end on CPU, with ``FakeLLM`` standing in for the CUDA engine only.

Everything else is real: vLLM's ``SamplingParams``/``TokensPrompt``/``RequestOutput`` types,
the policy's tokenizer and chat template, the trainer's transformers model and torch
optimisers, the core's rollout loop, the plugin registry and the run store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from coevolve_sdk.components.context import RunContext  # noqa: E402

from .fake_engine import FakeLLM  # noqa: E402

torch.set_num_threads(1)


def make_policy(ckpt: Path, types: tuple[Any, ...], tmp_path: Path, *, logs: list[str] | None = None, fake_kw: dict | None = None, **opts: Any):
    from coevolve_grpo.testing import PickToolEnv
    from coevolve_vllm.engine import ColocatedEngine
    from coevolve_vllm.policy import VLLMPolicy, VLLMPolicyOptions

    fake = FakeLLM(str(ckpt), types, **(fake_kw or {}))
    engine = ColocatedEngine(fake, in_process=True, sleep_level=opts.pop("sleep_level", 1), types=(types[0], types[1]))
    sink = logs if logs is not None else []
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: PickToolEnv(max_steps=2), log=sink.append)
    options = VLLMPolicyOptions(model=str(ckpt), device="cpu", dtype="float32", probe_tokens=24, **opts)
    pol = VLLMPolicy(options, ctx, engine=engine)
    ctx.policy = pol
    engine.trainer_model = pol.model
    return pol, fake


def train_step(pol: Any, lr: float = 1e-2, **opt_kw: Any) -> None:
    """One real optimiser step on the trainer's model (a language-model loss on the probe),
    announced with ``before_update`` as the core loop does."""
    pol.before_update()
    model = pol.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, **opt_kw)
    ids = torch.tensor([pol.probe_ids()])
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()


def weights_equal(pol: Any, fake: FakeLLM) -> bool:
    mine = dict(pol.model.named_parameters())
    return all(torch.equal(mine[n], p) for n, p in fake.model.hf.named_parameters())


def test_a_group_is_one_request_with_n_and_logprobs_match_the_trainer(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path)
    p = pol.encode_prompt([{"role": "user", "content": "press a button"}], [])
    q = pol.encode_prompt([{"role": "user", "content": "press another"}], [])
    gens = pol.generate([p, p, q, p], max_new_tokens=6, temperature=1.0)
    requests = [c[1] for c in fake.calls if c[0] == "generate"][-1]
    assert requests == [(p, 3), (q, 1)]
    assert len(gens) == 4
    for prompt, g in zip([p, p, q, p], gens):
        assert 1 <= len(g.token_ids) <= 6 and len(g.logprobs) == len(g.token_ids)
        # the returned logprobs are those of exactly these tokens under the (identical) trainer
        want = pol.trainer_logprobs(prompt + g.token_ids)[len(prompt) - 1 :]
        assert g.logprobs == pytest.approx(want, abs=1e-4)
        assert g.finished == (g.token_ids[-1] in pol.stop_token_ids)
        assert g.text == pol.decode(g.token_ids[:-1] if g.finished else g.token_ids)


def test_greedy_sends_each_distinct_prompt_once_and_copies(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path)
    p = pol.encode_prompt([{"role": "user", "content": "hi"}], [])
    gens = pol.generate([p, p, p], max_new_tokens=5, greedy=True)
    assert [c[1] for c in fake.calls if c[0] == "generate"][-1] == [(p, 1)]
    assert gens[0].token_ids == gens[1].token_ids == gens[2].token_ids


def test_sync_after_each_optimiser_step_with_sleep_and_probe(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path)
    p = pol.encode_prompt([{"role": "user", "content": "hi"}], [])
    pol.generate([p], max_new_tokens=2)
    first = pol.last_sync
    assert first is not None and first.path == "apply_model"  # rl_ipc is unavailable in-process
    assert [why for _, why in first.attempts] == ["not available: the engine was not built with weight_transfer_backend: ipc"]
    resets = fake.prefix_resets

    train_step(pol)  # before_update puts the engine to sleep
    assert fake.sleep_levels == [1] and not fake.awake
    assert not weights_equal(pol, fake)

    pol.generate([p], max_new_tokens=2)  # wakes, syncs, resets the cache, checks the probe
    assert fake.awake and ("wake_up", ("weights",)) in fake.calls and ("wake_up", ("kv_cache",)) in fake.calls
    assert weights_equal(pol, fake)
    assert fake.prefix_resets == resets + 1
    assert pol.last_sync is not first and pol.last_sync.probe is not None and pol.last_sync.probe.ok
    assert pol.last_sync.probe.max_abs_diff < 1e-4  # float32 on both sides here

    n_loads = fake.model.loads
    pol.generate([p], max_new_tokens=2)  # nothing changed: no sync
    assert fake.model.loads == n_loads


def test_level_two_sleep_forces_a_resync(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path, sleep_level=2)
    p = pol.encode_prompt([{"role": "user", "content": "hi"}], [])
    pol.generate([p], max_new_tokens=2)
    pol.before_update()  # an update phase that ends without changing the weights
    with torch.no_grad():
        pol.model(input_ids=torch.tensor([p]))  # a trainer forward (e.g. reference logprobs), no step
    assert fake.sleep_levels == [2] and not weights_equal(pol, fake)  # level 2 dropped vLLM's weights
    pol.generate([p], max_new_tokens=2)
    assert weights_equal(pol, fake) and pol.last_sync.probe.ok


@pytest.mark.parametrize(
    "broken,expected",
    [({"apply_model"}, "collective_rpc"), ({"apply_model", "collective_rpc"}, "direct")],
)
def test_fallback_paths(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path, broken: set, expected: str) -> None:
    logs: list[str] = []
    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path, logs=logs, fake_kw={"broken": broken})
    train_step(pol)
    metrics = pol.after_update()
    assert pol.last_sync.path == expected and weights_equal(pol, fake)
    assert metrics["vllm/probe_ok"] == 1.0 and metrics["vllm/sync_fallbacks"] == len(broken) + 1
    assert any(f"uses path '{expected}'" in m for m in logs)


def test_a_silent_sync_failure_shows_in_the_probe(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    logs: list[str] = []
    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path, logs=logs, fake_kw={"ignore_loads": True})
    p = pol.encode_prompt([{"role": "user", "content": "hi"}], [])
    pol.generate([p], max_new_tokens=2)  # same checkpoint on both sides: agrees
    train_step(pol, lr=0.5)
    metrics = pol.after_update()
    assert metrics["vllm/probe_ok"] == 0.0 and metrics["vllm/probe_logprob_mean_abs_diff"] > 0.1
    assert any("differ from the trainer's" in m for m in logs)

    from coevolve_vllm.policy import ProbeMismatch

    pol2, _ = make_policy(tiny_ckpt, vllm_types, tmp_path, fake_kw={"ignore_loads": True}, probe_on_fail="raise")
    train_step(pol2, lr=0.5)
    with pytest.raises(ProbeMismatch):
        pol2.after_update()


def test_core_rollout_multi_turn_token_accounting(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    from coevolve_grpo.testing import PickToolEnv
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups

    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path)
    env = PickToolEnv(max_steps=2)
    tasks = env.tasks()[:2]
    settings = RolloutConfig(group_size=3, max_new_tokens=8, temperature=1.0, max_context_tokens=512)
    groups = collect_groups(pol, EnvPool(lambda: PickToolEnv(max_steps=2)), tasks, settings, step=1)
    calls = [c[1] for c in fake.calls if c[0] == "generate"]
    first_turn = calls[1]  # calls[0] is the probe of the initial sync
    # pick-tool tasks share their request and tools, so all 2 x K opening prompts are
    # identical: one vLLM request with n = 6
    assert len(first_turn) == 1 and first_turn[0][1] == 6
    for g in groups:
        assert len(g.trajectories) == 3
        for tr in g.trajectories:
            assert len(tr.token_ids) == len(tr.loss_mask) == len(tr.logprobs)
            gen = [lp for lp, m in zip(tr.logprobs, tr.loss_mask) if m]
            assert len(gen) == tr.info["generated_tokens"] and all(v <= 0 for v in gen)


def test_plugin_registers_the_policy_and_after_update_syncs(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    """The core loop calls ``after_update()`` on every process after each optimisation step: the
    engine syncs there and the sync's metrics join the step's metrics."""
    from coevolve_sdk.components.registry import Registry
    from coevolve_vllm.policy import VLLMPolicy

    reg = Registry()
    assert reg.get("policy", "vllm") is VLLMPolicy

    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path)
    p = pol.encode_prompt([{"role": "user", "content": "hi"}], [])
    pol.generate([p, p], max_new_tokens=4)
    train_step(pol)
    assert not weights_equal(pol, fake)
    metrics = pol.after_update()
    assert weights_equal(pol, fake)
    assert metrics["vllm/probe_ok"] == 1.0 and metrics["vllm/rollout_tokens"] > 0
    assert "vllm/sync_path" in metrics and "vllm/probe_logprob_max_abs_diff" in metrics


def test_options_are_checked() -> None:
    from pydantic import ValidationError

    from coevolve_vllm.policy import VLLMPolicyOptions

    with pytest.raises(ValidationError, match="server_url"):
        VLLMPolicyOptions(model="m", mode="server")
    with pytest.raises(ValidationError, match="choose from"):
        VLLMPolicyOptions(model="m", sync_paths=["nccl"])
    with pytest.raises(ValidationError):
        VLLMPolicyOptions(model="m", gpu_memory_utilization=1.5)
    assert VLLMPolicyOptions(model="m", mode="server", server_url="http://h:8000").sync_paths is None


def test_grpo_trains_the_vllm_policy_through_the_declared_seam(tiny_ckpt: Path, vllm_types: Any, tmp_path: Path) -> None:
    """GRPO and the vllm policy meet only through ``TrainablePolicy``: GRPO hands the module it
    trains back with ``set_decoding_module``; the loop's ``before_update`` puts the engine to
    sleep; ``after_update`` syncs; a checkpoint loaded through ``load`` reaches the engine."""
    from coevolve_grpo.algorithm import GRPO, GRPOOptions
    from coevolve_grpo.testing import PickToolEnv
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups

    pol, fake = make_policy(tiny_ckpt, vllm_types, tmp_path)
    alg = GRPO(GRPOOptions(lr=5e-2, beta=0.0, cpu=True, seed=0), pol.context)
    pool = EnvPool(lambda: PickToolEnv(max_steps=2))
    settings = RolloutConfig(group_size=4, max_new_tokens=8, temperature=1.0, max_context_tokens=512)
    groups = collect_groups(pol, pool, PickToolEnv().tasks()[:2], settings, step=1, seed=1)
    assert weights_equal(pol, fake)
    pol.before_update()  # what the loop does around Algorithm.step
    assert not fake.awake
    groups[0].trajectories[0].score = 1.0 - groups[0].trajectories[1].score  # some advantage to learn from
    alg.step(groups)
    assert not weights_equal(pol, fake)
    metrics = pol.after_update()
    assert weights_equal(pol, fake) and metrics["vllm/probe_ok"] == 1.0

    ck = tmp_path / "ck"
    alg.save(ck / "algorithm")
    pol2, fake2 = make_policy(tiny_ckpt, vllm_types, tmp_path)  # the original weights, in both
    p = pol2.encode_prompt([{"role": "user", "content": "hi"}], [])
    pol2.generate([p], max_new_tokens=2)
    alg2 = GRPO(GRPOOptions(lr=5e-2, beta=0.0, cpu=True, seed=0), pol2.context)
    alg2.load(ck / "algorithm")
    trained = dict(pol.model.named_parameters())
    assert all(torch.equal(trained[n], q) for n, q in pol2.model.named_parameters())
    assert not weights_equal(pol2, fake2)  # the engine still holds the original weights ...
    pol2.generate([p], max_new_tokens=2)  # ... until the next rollout syncs the loaded ones
    assert weights_equal(pol2, fake2) and pol2.last_sync.probe.ok
