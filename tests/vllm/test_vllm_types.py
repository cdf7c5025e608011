"""The adapter against vLLM's own pure-Python types (from an install or the unpacked 0.33.0
wheel; see conftest). No engine is involved here."""

from __future__ import annotations

from typing import Any

import pytest

from coevolve_vllm.shaping import (
    prompt_logprobs_from_request_output,
    samples_from_request_output,
    sampling_kwargs,
)


def test_sampling_kwargs_are_accepted_by_vllm_sampling_params(vllm_types: tuple[Any, ...]) -> None:
    SamplingParams = vllm_types[0]
    sp = SamplingParams(**sampling_kwargs(n=8, max_new_tokens=24, temperature=0.9, greedy=False, stop_token_ids=[2, 0], seed=5))
    assert sp.n == 8 and sp.max_tokens == 24 and sp.temperature == pytest.approx(0.9)
    assert sp.logprobs == 0 and sp.stop_token_ids == [0, 2] and sp.seed == 5
    assert sp.detokenize is False and sp.skip_special_tokens is False
    greedy = SamplingParams(**sampling_kwargs(n=1, max_new_tokens=4, temperature=0.9, greedy=True, stop_token_ids=[2]))
    assert greedy.temperature == 0.0


def test_vllm_itself_refuses_n_above_one_when_greedy(vllm_types: tuple[Any, ...]) -> None:
    """Why greedy requests are sent once per distinct prompt and copied (shaping docstring)."""
    SamplingParams = vllm_types[0]
    with pytest.raises(Exception, match="n must be 1"):
        SamplingParams(n=2, temperature=0.0)


def test_tokens_prompt_carries_the_ids(vllm_types: tuple[Any, ...]) -> None:
    TokensPrompt = vllm_types[1]
    assert TokensPrompt(prompt_token_ids=[1, 2, 3])["prompt_token_ids"] == [1, 2, 3]


def _output(vllm_types: tuple[Any, ...], flat: bool) -> Any:
    _, _, RequestOutput, CompletionOutput, Logprob, FlatLogprobs = vllm_types

    def lps(ids: list[int], values: list[float]) -> Any:
        # logprobs=0 returns the sampled token; a top-k request would add others (rank order)
        positions = [{7: Logprob(-9.0, rank=5), tok: Logprob(v, rank=1)} if tok != 7 else {tok: Logprob(v, rank=1)}
                     for tok, v in zip(ids, values)]
        if not flat:
            return positions
        f = FlatLogprobs()
        f.extend(positions)
        return f

    outs = [
        CompletionOutput(index=1, text="", token_ids=[5, 2], cumulative_logprob=None, logprobs=lps([5, 2], [-0.5, -0.25]), finish_reason="stop"),
        CompletionOutput(index=0, text="", token_ids=[4, 7, 9], cumulative_logprob=None, logprobs=lps([4, 7, 9], [-1.0, -2.0, -3.0]), finish_reason="length"),
    ]
    plp = [None, {11: Logprob(-1.25, rank=2)}, {12: Logprob(-0.75, rank=1)}]
    return RequestOutput(request_id="r", prompt=None, prompt_token_ids=[10, 11, 12], prompt_logprobs=plp, outputs=outs, finished=True)


@pytest.mark.parametrize("flat", [False, True], ids=["dict-logprobs", "flat-logprobs"])
def test_request_output_conversion(vllm_types: tuple[Any, ...], flat: bool) -> None:
    samples = samples_from_request_output(_output(vllm_types, flat))
    assert [s.token_ids for s in samples] == [[4, 7, 9], [5, 2]]  # sorted by CompletionOutput.index
    assert samples[0].logprobs == [-1.0, -2.0, -3.0] and samples[1].logprobs == [-0.5, -0.25]
    assert [s.finish_reason for s in samples] == ["length", "stop"]


def test_missing_logprobs_are_a_clear_error(vllm_types: tuple[Any, ...]) -> None:
    _, _, RequestOutput, CompletionOutput, *_ = vllm_types
    out = RequestOutput(request_id="r", prompt=None, prompt_token_ids=[1], prompt_logprobs=None, finished=True,
                        outputs=[CompletionOutput(index=0, text="", token_ids=[3], cumulative_logprob=None, logprobs=None)])
    with pytest.raises(ValueError, match="logprobs=0"):
        samples_from_request_output(out)
    with pytest.raises(ValueError, match="prompt_logprobs=0"):
        prompt_logprobs_from_request_output(out)


def test_prompt_logprobs_conversion(vllm_types: tuple[Any, ...]) -> None:
    assert prompt_logprobs_from_request_output(_output(vllm_types, False)) == [-1.25, -0.75]
