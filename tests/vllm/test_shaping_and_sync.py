"""The adapter's own logic with no vLLM at all: request shaping, output conversion, path
selection and the probe comparison. These run everywhere (CI included)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coevolve_vllm.shaping import (
    PromptGroup,
    Sample,
    completions_payload,
    plan_requests,
    prompt_logprobs_from_completion_json,
    samples_from_completion_choices,
    sampling_kwargs,
    to_generations,
)
from coevolve_vllm.sync import PATH_IDS, ProbeResult, SyncError, Unavailable, WeightSync, compare_logprobs, find_model

STOP = 2


def decode(ids: list[int]) -> str:
    return " ".join(map(str, ids))


# ---------------------------------------------------------------------- plan_requests
def test_group_of_k_identical_prompts_becomes_one_request_with_n_k() -> None:
    a, b = [5, 6, 7], [5, 6, 8]
    groups = plan_requests([a, a, b, a, b])
    assert [(g.token_ids, g.positions, g.n) for g in groups] == [(a, [0, 1, 3], 3), (b, [2, 4], 2)]


def test_merging_can_be_turned_off() -> None:
    groups = plan_requests([[1, 2], [1, 2]], merge_duplicates=False)
    assert [g.n for g in groups] == [1, 1]


def test_empty_prompt_is_refused() -> None:
    with pytest.raises(ValueError, match="empty prompt"):
        plan_requests([[1], []])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), min_size=1, max_size=12))
def test_plan_covers_every_position_once_and_groups_only_equal_prompts(prompts: list[list[int]]) -> None:
    groups = plan_requests(prompts)
    positions = sorted(p for g in groups for p in g.positions)
    assert positions == list(range(len(prompts)))
    assert len({tuple(g.token_ids) for g in groups}) == len(groups)  # distinct requests
    for g in groups:
        assert all(prompts[p] == g.token_ids for p in g.positions)
    firsts = [g.positions[0] for g in groups]
    assert firsts == sorted(firsts)  # order of first appearance


# ---------------------------------------------------------------------- sampling kwargs
def test_sampling_kwargs_ask_for_sampled_token_logprobs_and_stop_tokens() -> None:
    kw = sampling_kwargs(n=8, max_new_tokens=32, temperature=0.9, greedy=False, stop_token_ids=[7, 2, 7])
    assert kw["n"] == 8 and kw["max_tokens"] == 32 and kw["temperature"] == 0.9
    assert kw["logprobs"] == 0 and kw["stop_token_ids"] == [2, 7]
    assert kw["top_p"] == 1.0 and kw["top_k"] == 0 and kw["skip_special_tokens"] is False
    assert "seed" not in kw


def test_greedy_means_temperature_zero_and_one_sample() -> None:
    assert sampling_kwargs(n=1, max_new_tokens=4, temperature=0.9, greedy=True, stop_token_ids=[2])["temperature"] == 0.0
    assert sampling_kwargs(n=1, max_new_tokens=4, temperature=0.0, greedy=False, stop_token_ids=[2])["temperature"] == 0.0
    with pytest.raises(ValueError, match="n == 1"):
        sampling_kwargs(n=3, max_new_tokens=4, temperature=0.9, greedy=True, stop_token_ids=[2])
    with pytest.raises(ValueError, match="max_new_tokens"):
        sampling_kwargs(n=1, max_new_tokens=0, temperature=1.0, greedy=False, stop_token_ids=[2])


# ---------------------------------------------------------------------- to_generations
def test_samples_are_scattered_back_to_their_positions() -> None:
    groups = [PromptGroup([1], [0, 2]), PromptGroup([9], [1])]
    samples = [
        [Sample([4, STOP], [-0.5, -0.1]), Sample([5, 6], [-1.0, -2.0])],
        [Sample([8, STOP], [-0.3, -0.2])],
    ]
    gens = to_generations(groups, samples, stop_token_ids=[STOP], decode=decode)
    assert [g.token_ids for g in gens] == [[4, STOP], [8, STOP], [5, 6]]
    assert [g.finished for g in gens] == [True, True, False]
    assert gens[0].text == "4" and gens[2].text == "5 6"  # the end-of-turn token is not text
    assert gens[2].logprobs == [-1.0, -2.0]


def test_greedy_output_is_copied_to_duplicates() -> None:
    groups = [PromptGroup([1], [0, 1, 2])]
    gens = to_generations(groups, [[Sample([3, STOP], [-0.1, -0.2])]], stop_token_ids=[STOP], decode=decode, replicate=True)
    assert [g.token_ids for g in gens] == [[3, STOP]] * 3


@pytest.mark.parametrize(
    "samples,match",
    [
        ([[Sample([1], [-0.1])]], "asked for 2"),
        ([[Sample([1], [-0.1, -0.2]), Sample([1], [-0.1])]], "different number"),
        ([[Sample([1], [0.5]), Sample([1], [-0.1])]], "invalid log-probabilities"),
        ([[Sample([1], [float("nan")]), Sample([1], [-0.1])]], "invalid log-probabilities"),
    ],
)
def test_bad_engine_outputs_are_reported(samples: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        to_generations([PromptGroup([1], [0, 1])], samples, stop_token_ids=[STOP], decode=decode)


# ---------------------------------------------------------------------- server JSON
def _choice(index: int, ids: list[int], lps: list[float], finish: str = "stop") -> dict[str, Any]:
    return {"index": index, "text": "", "token_ids": ids, "finish_reason": finish,
            "logprobs": {"token_logprobs": lps, "tokens": [f"t{i}" for i in ids], "top_logprobs": [], "text_offset": []}}


def test_completion_choices_are_read_prompt_by_prompt() -> None:
    choices = [_choice(3, [9], [-0.9]), _choice(0, [1], [-0.1]), _choice(2, [7], [-0.7]), _choice(1, [2], [-0.2])]
    out = samples_from_completion_choices(choices, n=2, n_prompts=2)
    assert [[s.token_ids for s in grp] for grp in out] == [[[1], [2]], [[7], [9]]]


def test_completion_choices_without_token_ids_or_logprobs_are_refused() -> None:
    c = _choice(0, [1], [-0.1])
    del c["token_ids"]
    with pytest.raises(ValueError, match="return_token_ids"):
        samples_from_completion_choices([c], n=1, n_prompts=1)
    c = _choice(0, [1], [-0.1])
    c["logprobs"] = None
    with pytest.raises(ValueError, match="logprobs: 0"):
        samples_from_completion_choices([c], n=1, n_prompts=1)
    with pytest.raises(ValueError, match="expected 2 choices"):
        samples_from_completion_choices([_choice(0, [1], [-0.1])], n=2, n_prompts=1)


def test_completions_payload_carries_token_ids_and_logprob_settings() -> None:
    kw = sampling_kwargs(n=4, max_new_tokens=16, temperature=0.9, greedy=False, stop_token_ids=[STOP], seed=3)
    body = completions_payload("m", [[1, 2], [3]], kw)
    assert body["prompt"] == [[1, 2], [3]] and body["n"] == 4 and body["seed"] == 3
    assert body["return_token_ids"] is True and body["logprobs"] == 0 and body["stop_token_ids"] == [STOP]


def test_prompt_logprobs_json_skips_the_first_token() -> None:
    choice = {"prompt_logprobs": [None, {"5": {"logprob": -1.5, "rank": 3}}, {"6": {"logprob": -0.5, "rank": 1}}]}
    assert prompt_logprobs_from_completion_json(choice, [4, 5, 6]) == [-1.5, -0.5]
    with pytest.raises(ValueError, match="missing"):
        prompt_logprobs_from_completion_json(choice, [4, 5, 7])


# ---------------------------------------------------------------------- probe comparison
def test_compare_logprobs_within_and_beyond_tolerance() -> None:
    ok = compare_logprobs([-1.0, -2.0], [-1.01, -1.98], max_tol=0.1, mean_tol=0.05)
    assert ok.ok and ok.tokens == 2 and ok.max_abs_diff == pytest.approx(0.02)
    bad = compare_logprobs([-1.0, -2.0], [-1.0, -4.0], max_tol=1.0, mean_tol=0.05)
    assert not bad.ok and bad.max_abs_diff == pytest.approx(2.0)
    assert not compare_logprobs([-1.0], [float("nan")], max_tol=1.0, mean_tol=1.0).ok
    with pytest.raises(ValueError, match="different lengths"):
        compare_logprobs([-1.0], [-1.0, -2.0], max_tol=1, mean_tol=1)
    assert bad.metrics()["vllm/probe_ok"] == 0.0


# ---------------------------------------------------------------------- path selection
class Target:
    """Records which paths were used; each path behaves as ``behaviour[path]`` says."""

    def __init__(self, behaviour: dict[str, str]) -> None:
        self.behaviour = behaviour
        self.used: list[str] = []
        self.resets = 0
        self.loaded_by: str | None = None

    def sync_via(self, path: str, weights: Any) -> int:
        what = self.behaviour.get(path, "unavailable")
        self.used.append(path)
        if what == "unavailable":
            raise Unavailable("not here")
        if what == "error":
            raise RuntimeError("boom")
        self.loaded_by = path if what == "ok" else "garbage"
        return len(list(weights()))

    def reset_prefix_cache(self) -> None:
        self.resets += 1


def weights() -> list[tuple[str, int]]:
    return [("a", 1), ("b", 2)]


def probe_for(target: Target):
    def verify() -> ProbeResult:
        good = target.loaded_by not in (None, "garbage")
        return ProbeResult(0.01 if good else 3.0, 0.01 if good else 1.0, 8, good)
    return verify


def test_first_working_path_is_chosen_and_reported() -> None:
    logs: list[str] = []
    t = Target({"rl_ipc": "unavailable", "apply_model": "error", "collective_rpc": "ok", "direct": "ok"})
    ws = WeightSync(["rl_ipc", "apply_model", "collective_rpc", "direct"], log=logs.append)
    rep = ws.sync(t, weights, probe_for(t))
    assert rep.path == "collective_rpc" and rep.params == 2 and rep.probe is not None and rep.probe.ok
    assert [p for p, _ in rep.attempts] == ["rl_ipc", "apply_model"]
    assert "RuntimeError: boom" in rep.attempts[1][1]
    assert t.resets == 1  # the prefix cache is reset after the load
    assert any("collective_rpc" in m for m in logs)
    m = rep.metrics()
    assert m["vllm/sync_path"] == PATH_IDS["collective_rpc"] and m["vllm/sync_fallbacks"] == 2.0
    # the chosen path is tried first next time
    t.used.clear()
    rep2 = ws.sync(t, weights, probe_for(t))
    assert t.used == ["collective_rpc"] and rep2.attempts == []


def test_a_path_that_loads_garbage_is_caught_by_the_probe_and_skipped() -> None:
    t = Target({"apply_model": "garbage", "collective_rpc": "ok"})
    rep = WeightSync(["apply_model", "collective_rpc"], log=lambda m: None).sync(t, weights, probe_for(t))
    assert rep.path == "collective_rpc"
    assert "probe disagrees" in rep.attempts[0][1]


def test_probe_failure_on_every_path_is_reported_not_hidden() -> None:
    t = Target({"apply_model": "garbage", "direct": "garbage"})
    rep = WeightSync(["apply_model", "direct"], log=lambda m: None).sync(t, weights, probe_for(t))
    assert rep.probe is not None and not rep.probe.ok
    assert rep.metrics()["vllm/probe_ok"] == 0.0


def test_no_path_works_lists_every_reason() -> None:
    t = Target({"apply_model": "error"})
    with pytest.raises(SyncError) as e:
        WeightSync(["rl_ipc", "apply_model"], log=lambda m: None).sync(t, weights)
    assert "rl_ipc: not available" in str(e.value) and "apply_model: failed: RuntimeError: boom" in str(e.value)


def test_unknown_paths_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown weight sync path"):
        WeightSync(["teleport"])


def test_find_model_walks_the_attribute_chains() -> None:
    from types import SimpleNamespace

    model = SimpleNamespace(load_weights=lambda weights: None)
    old = SimpleNamespace(llm_engine=SimpleNamespace(model_executor=SimpleNamespace(
        driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model)))))
    found, chain = find_model(old)
    assert found is model and chain == "llm_engine.model_executor.driver_worker.model_runner.model"
    with pytest.raises(Unavailable, match="no in-process model"):
        find_model(SimpleNamespace())
