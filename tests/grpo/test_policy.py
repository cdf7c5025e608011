"""The hf/tiny policies: rendering in pieces, sampling logprobs, persistence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
from coevolve_grpo.testing import BUTTONS, PickToolEnv

from .conftest import make_context, tiny_policy


@pytest.fixture(scope="module")
def pol(tiny_dir, tmp_path_factory):
    return tiny_policy(make_context(tmp_path_factory.mktemp("p"), max_steps=3), tiny_dir)


def _opening():
    env = PickToolEnv(max_steps=3)
    _, info = env.reset(options={"task": env.target_task()})
    return info["messages"], info["tools"]


_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x24F, exclude_characters="<>"), max_size=30)
_action = st.one_of(st.sampled_from(BUTTONS).map(lambda b: format_tool_call(b, {})), _text)
_reply = st.one_of(_text.map(lambda t: {"role": "tool", "content": t}), _text.map(lambda t: {"role": "user", "content": t}))


@given(turns=st.lists(st.tuples(_action, st.lists(_reply, min_size=1, max_size=2)), min_size=1, max_size=3))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_prompt_plus_completions_plus_followups_equals_whole_rendering(pol, turns):
    opening, tools = _opening()
    ids = pol.encode_prompt(opening, tools)
    messages = list(opening)
    for action, replies in turns:
        ids = ids + pol.encode_completion(action)
        ids = ids + pol.encode_followup(replies)
        messages += [{"role": "assistant", "content": action}] + replies
    whole = pol.render(messages, tools, add_generation_prompt=True)
    assert pol.decode(ids) == whole
    assert ids == pol.encode_text(whole)


def test_rollout_tokens_match_the_rendered_conversation(pol):
    torch.manual_seed(1)
    env = PickToolEnv(max_steps=3)
    groups = collect_groups(pol, EnvPool(lambda: PickToolEnv(max_steps=3)), [env.target_task()], RolloutConfig(group_size=6, max_new_tokens=12, temperature=1.0), 0)
    checked = 0
    for t in groups[0].trajectories:
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)
        assert len(t.steps) >= 1 and t.info["turns"] == len(t.steps)
        text = pol.decode(t.token_ids)
        whole = pol.render(t.messages, [x.as_openai() for x in env.tools()], add_generation_prompt=False)
        assert whole.startswith(text)
        agent = [tok for tok, m in zip(t.token_ids, t.loss_mask) if m]
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.loss_mask) if not m)
        assert all(lp <= 0.0 for lp, m in zip(t.logprobs, t.loss_mask) if m)
        assert len(agent) == t.info["generated_tokens"]
        checked += 1
    assert checked == 6


def test_generate_logprobs_are_raw_teacher_forced_logprobs(pol):
    torch.manual_seed(0)
    opening, tools = _opening()
    p1 = pol.encode_prompt(opening, tools)
    p2 = pol.encode_prompt(opening[1:], [])
    p3 = p2[: len(p2) // 2]
    prompts = [p1, p2, p3]
    gens = pol.generate(prompts, max_new_tokens=20, temperature=0.7)
    model = pol.model
    for p, g in zip(prompts, gens):
        assert len(g.token_ids) == len(g.logprobs) >= 1
        seq = torch.tensor([p + g.token_ids])
        with torch.no_grad():
            logits = model(input_ids=seq).logits[0].float()
        lp = torch.log_softmax(logits[len(p) - 1 : -1], -1).gather(1, torch.tensor(g.token_ids)[:, None])[:, 0]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-4), (lp, g.logprobs)
        eos = pol.eos_token_id
        assert g.finished == (g.token_ids[-1] == eos)
        assert eos not in g.token_ids[:-1]
        assert g.text == pol.decode(g.token_ids[:-1] if g.finished else g.token_ids)
        if not g.finished:
            assert len(g.token_ids) == 20


def test_greedy_follows_the_argmax(pol):
    opening, tools = _opening()
    p = pol.encode_prompt(opening, tools)
    g = pol.generate([p], max_new_tokens=8, greedy=True)[0]
    ids = list(p)
    for tok in g.token_ids:
        with torch.no_grad():
            nxt = int(pol.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
        assert tok == nxt
        ids.append(tok)


def test_save_opens_with_auto_classes_and_as_hf_policy(pol, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coevolve_grpo.policies import HFPolicy

    pol.save(tmp_path / "ck")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "ck")
    tok = AutoTokenizer.from_pretrained(tmp_path / "ck")
    x = torch.tensor([pol.encode_text("Press the right button.")])
    with torch.no_grad():
        assert torch.equal(model(input_ids=x).logits, pol.model(input_ids=x).logits)
    assert tok.chat_template == pol.tokenizer.chat_template
    hf = HFPolicy(HFPolicy.Options(model=str(tmp_path / "ck"), device="cpu"), make_context(tmp_path))
    opening, tools = _opening()
    assert hf.encode_prompt(opening, tools) == pol.encode_prompt(opening, tools)
    assert hf.eos_token_id == pol.eos_token_id


def test_tokenizer_is_deterministic_and_fitted_to_the_environment(tmp_path):
    from coevolve_grpo.tokenizer import env_texts, train_tokenizer

    a = train_tokenizer(env_texts(PickToolEnv()), vocab_size=600)
    b = train_tokenizer(env_texts(PickToolEnv()), vocab_size=600)
    a.save_pretrained(tmp_path / "a")
    b.save_pretrained(tmp_path / "b")
    assert json.loads((tmp_path / "a" / "tokenizer.json").read_text()) == json.loads((tmp_path / "b" / "tokenizer.json").read_text())
    # Specials are single tokens; a button call is short.
    for s in ("<|im_end|>", "<tool_call>", "</tool_call>", "<|im_start|>"):
        assert len(a(s, add_special_tokens=False)["input_ids"]) == 1
    assert len(a(format_tool_call("press_blue", {}), add_special_tokens=False)["input_ids"]) <= 20


def test_tiny_policy_builds_from_the_environment(tmp_path):
    from coevolve_grpo.policies import TinyPolicy

    ctx = make_context(tmp_path)
    pol = TinyPolicy(TinyPolicy.Options(hidden_size=96, heads=4, kv_heads=2), ctx)
    cfg = pol.model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.model_type) == (96, 2, "qwen3")
    assert pol.tokenizer.convert_ids_to_tokens(pol.eos_token_id) == "<|im_end|>"
    with pytest.raises(ValueError):
        TinyPolicy(TinyPolicy.Options(hidden_size=100, heads=3), ctx).model


@pytest.mark.parametrize("greedy", [True, False])
def test_rows_that_finish_early_leave_the_batch_without_changing_any_row(pol, greedy, monkeypatch):
    """Finished rows are dropped from the decoding batch (with their cache). Whatever the order
    rows finish in, each row's tokens are what decoding it alone gives (greedy) and each
    logprob is the teacher-forced one (sampled); rows finished before the others keep their
    length, their stop token and ``finished``."""
    opening, tools = _opening()
    full = pol.encode_prompt(opening, tools)
    prompts = [full, full[: len(full) // 2], pol.encode_prompt(opening[1:], []), full[: len(full) // 3], full[:-3], full[:7]]
    from transformers.cache_utils import Cache

    dropped: list[int] = []
    select = Cache.batch_select_indices
    monkeypatch.setattr(Cache, "batch_select_indices", lambda self, idx: (dropped.append(len(idx)), select(self, idx))[1])
    saved = pol._stop_ids
    # a third of the vocabulary ends a turn, so that rows stop at different steps
    pol._stop_ids = sorted({*saved, *range(3, len(pol.tokenizer), 3)})
    try:
        torch.manual_seed(1)
        gens = pol.generate(prompts, max_new_tokens=12, temperature=1.0, greedy=greedy)
        alone = [pol.generate([p], max_new_tokens=12, greedy=True)[0] for p in prompts] if greedy else None
    finally:
        pol._stop_ids = saved
    lengths = [len(g.token_ids) for g in gens]
    assert len(set(lengths)) > 1, f"every row ran {lengths[0]} tokens: nothing left the batch early"
    assert dropped, "finished rows stayed in the batch"
    stops = set(pol._stop_ids) | set(range(3, len(pol.tokenizer), 3))
    for i, (p, g) in enumerate(zip(prompts, gens)):
        assert len(g.token_ids) == len(g.logprobs) >= 1
        assert g.finished == (g.token_ids[-1] in stops) and not (set(g.token_ids[:-1]) & stops)
        if alone is not None:
            assert g.token_ids == alone[i].token_ids, (i, g.token_ids, alone[i].token_ids)
        with torch.no_grad():
            logits = pol.model(input_ids=torch.tensor([p + g.token_ids])).logits[0].float()
        lp = torch.log_softmax(logits[len(p) - 1 : -1], -1).gather(1, torch.tensor(g.token_ids)[:, None])[:, 0]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-4), (i, lp, g.logprobs)


def _count_fed_tokens(pol, monkeypatch) -> list[int]:
    """Tokens the model is given per forward call (the cache's positions are not counted)."""
    import functools

    fed: list[int] = []
    forward = pol.model.forward

    @functools.wraps(forward)
    def counting(*args, **kwargs):
        fed.append(int(kwargs["input_ids"].numel()))
        return forward(*args, **kwargs)

    monkeypatch.setattr(pol.model, "forward", counting)
    return fed


def test_later_turns_reuse_the_conversation_cache_and_sample_what_recomputing_would(pol, monkeypatch):
    """A rollout's second and third turns compute only the tokens added since the turn before
    (the rest comes from the kept cache): fewer tokens through the model, the same episodes."""
    env = PickToolEnv(max_steps=3)
    settings = RolloutConfig(group_size=6, max_new_tokens=10, temperature=1.0)
    runs = {}
    for reuse in (False, True):
        monkeypatch.setattr(pol.options, "reuse_turn_cache", reuse)
        fed = _count_fed_tokens(pol, monkeypatch)
        torch.manual_seed(5)
        groups = collect_groups(pol, EnvPool(lambda: PickToolEnv(max_steps=3)), [env.target_task(), env.target_task()], settings, 0)
        runs[reuse] = ([t for g in groups for t in g.trajectories], sum(fed))
        assert not pol._turn_caches, "the rollout is over but its conversations' caches are still held"
    (off, fed_off), (on, fed_on) = runs[False], runs[True]
    assert max(t.info["turns"] for t in on) >= 2, "no episode reached a second turn: nothing to reuse"
    assert fed_on < fed_off, (fed_on, fed_off)
    for a, b in zip(off, on):
        assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_a_kept_cache_is_not_used_after_the_weights_change(pol, monkeypatch):
    opening, tools = _opening()
    first = pol.encode_prompt(opening, tools)
    torch.manual_seed(2)
    g = pol.generate([first], max_new_tokens=6, temperature=1.0)[0]
    follow = pol.encode_followup([{"role": "tool", "content": "pressed"}])
    second = first + g.token_ids + ([] if g.finished else [pol.eos_token_id]) + follow
    weight = next(pol.model.parameters())
    with torch.no_grad():
        weight.add_(0.25)  # what an optimiser step does: the kept keys and values are stale now
    try:
        fed = _count_fed_tokens(pol, monkeypatch)
        g2 = pol.generate([second], max_new_tokens=6, temperature=1.0)[0]
        assert fed[0] == len(second), "the second turn used keys and values computed with the old weights"
        with torch.no_grad():
            logits = pol.model(input_ids=torch.tensor([second + g2.token_ids])).logits[0].float()
    finally:
        with torch.no_grad():
            weight.sub_(0.25)
    lp = torch.log_softmax(logits[len(second) - 1 : -1], -1).gather(1, torch.tensor(g2.token_ids)[:, None])[:, 0]
    assert torch.allclose(lp, torch.tensor(g2.logprobs), atol=1e-4)


def test_hf_policy_with_absolute_positions_decodes_left_padded_batches(pol, tmp_path):
    """Any causal LM: a GPT-2 (learned absolute positions) built from a config and saved
    locally; left padding must not shift the positions of the real tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from coevolve_grpo.policies import HFPolicy

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(pol.tokenizer), n_positions=1024, n_embd=32, n_layer=2, n_head=2,
                     bos_token_id=pol.eos_token_id, eos_token_id=pol.eos_token_id, pad_token_id=pol.tokenizer.pad_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "gpt2")
    pol.tokenizer.save_pretrained(tmp_path / "gpt2")
    hf = HFPolicy(HFPolicy.Options(model=str(tmp_path / "gpt2"), device="cpu"), make_context(tmp_path))
    opening, tools = _opening()
    prompts = [hf.encode_prompt(opening, tools), hf.encode_prompt(opening[1:], [])]
    gens = hf.generate(prompts, max_new_tokens=6, temperature=1.0)
    for p, g in zip(prompts, gens):
        with torch.no_grad():
            logits = hf.model(input_ids=torch.tensor([p + g.token_ids])).logits[0].float()
        lp = torch.log_softmax(logits[len(p) - 1 : -1], -1).gather(1, torch.tensor(g.token_ids)[:, None])[:, 0]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-4)


def test_tiny_initial_weights_follow_the_run_seed_unless_the_option_sets_one(tmp_path):
    """Issue 19: five run seeds must mean five initial models, not one; an explicit option
    still pins the initialisation (and two builds with one seed are bit-identical)."""
    from coevolve_grpo.policies import TinyPolicy

    def weights(run_seed: int, **opts) -> dict[str, torch.Tensor]:
        pol = TinyPolicy(TinyPolicy.Options(hidden_size=32, heads=2, kv_heads=1, **opts), make_context(tmp_path, seed=run_seed))
        return {k: v.detach().clone() for k, v in pol.model.state_dict().items()}

    def same(a, b) -> bool:
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    s0, s0_again, s1 = weights(0), weights(0), weights(1)
    assert same(s0, s0_again)
    assert not same(s0, s1), "runs with seeds 0 and 1 start from the same initial weights"
    assert same(weights(5, seed=3), weights(6, seed=3)), "an explicit seed option no longer pins the initial weights"
