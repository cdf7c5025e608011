"""Reply parsers (property-based), prompt templates, options and the lazy import of litellm."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from coevolve_litellm import (
    LiteLLMTeacher,
    LiteLLMTeacherOptions,
    PromptSet,
    ReplyParseError,
    extract_action,
    extract_json,
    parse_judgement,
)
from coevolve_sdk.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "plugins" / "coevolve-litellm" / "coevolve_litellm" / "templates"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
noise = st.text(alphabet=st.characters(blacklist_characters="{}[]`<>"), max_size=60)


# ------------------------------------------------------------------------------ property-based
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), st.binary(max_size=50).map(lambda b: b.decode("latin-1")), st.none(), st.integers()))
def test_parsers_raise_only_their_own_error(text):
    for fn in (lambda t: extract_json(t, dict), lambda t: extract_json(t, (dict, list)), extract_action, parse_judgement):
        try:
            fn(text)
        except ReplyParseError:
            pass


@settings(max_examples=200)
@given(st.text(alphabet="{}[]\":,0123456789 atrue\\", max_size=300))
def test_bracket_soup_raises_only_parse_error(text):
    try:
        value = extract_json(text, (dict, list))
    except ReplyParseError:
        return
    assert isinstance(value, (dict, list))


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5), noise, noise, st.booleans())
def test_object_embedded_in_prose_is_found(obj, before, after, fenced):
    body = json.dumps(obj)
    text = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before} {body} {after}"
    assert extract_json(text, dict) == obj


@settings(max_examples=100)
@given(st.lists(json_values, max_size=5), noise)
def test_list_found_when_asked_for(lst, before):
    assert extract_json(before + json.dumps(lst), (dict, list)) == lst


def test_deep_nesting_and_huge_replies_are_parse_errors():
    with pytest.raises(ReplyParseError):
        extract_json("[" * 100_000, (dict, list))
    with pytest.raises(ReplyParseError, match="limit"):
        extract_json("x" * 300_000, dict)
    assert extract_json("[" * 300 + ' {"a": 1}', dict) == {"a": 1}
    with pytest.raises(ReplyParseError):  # past the cap on decode attempts: bounded work, clear error
        extract_json("[" * 5000 + ' {"a": 1}', dict)


@given(st.sampled_from(["true", "True", "TRUE", "false", "False"]), noise)
def test_judgement_lines(word, reason):
    assert parse_judgement(f"Success: {word}\nReason: {reason}") is (word.lower() == "true")


def test_judgement_variants():
    assert parse_judgement("<think>Success: false</think>\n**Success**: [true]\nReason: ok") is True
    assert parse_judgement("- Success: false") is False
    for bad in ["", "Successful: true", "The task was a success: true story", "Success: maybe"]:
        with pytest.raises(ReplyParseError):
            parse_judgement(bad)


def test_action_extraction():
    call = '<tool_call>{"name": "get", "arguments": {"key": "a"}}</tool_call>'
    assert extract_action(f"Reason.\n<action>\n{call}\n</action>") == call
    assert extract_action(f"<action>first</action> then <ACTION>{call}</ACTION>") == call  # the last block
    assert extract_action(f"I will call {call} and {call}") == f"{call}\n{call}"  # no tags: the calls
    assert extract_action(f"<think><action>nope</action></think><action>{call}</action>") == call
    with pytest.raises(ReplyParseError, match="no <action>"):
        extract_action("I would set a to 1.")


# ------------------------------------------------------------------------------ prompts
def test_every_packaged_template_loads_and_fills():
    ps = PromptSet("v1")
    for stage, names in PromptSet.STAGES.items():
        msgs = ps.get(stage).render(**{n: f"<{n}>" for n in names})
        assert [m["role"] for m in msgs] == ["system", "user"]
        text = "".join(m["content"] for m in msgs)
        assert "{{" not in text and all(f"<{n}>" in text for n in names)
    for kind in ("forgetting", "boundary", "rare", "generic"):
        assert "<ctx>" in ps.guidance(kind).render(context="<ctx>", signal_kind=kind)[0]["content"]


def test_inserted_text_is_not_expanded_again():
    ps = PromptSet("v1")
    names = PromptSet.STAGES["reflect"]
    msgs = ps.get("reflect").render(**{n: "{{trajectory}}" if n == "task_query" else "x" for n in names})
    assert "{{trajectory}}" in msgs[-1]["content"]


def test_user_template_dir_overrides_and_versions(tmp_path, scripted, env, seed_task, signalled):
    pkg = TEMPLATES
    for f in pkg.glob("*-v1.md"):
        (tmp_path / f.name.replace("-v1", "-mine2")).write_text(f.read_text())
    (tmp_path / "reflect-mine2.md").write_text("<!-- system -->\nBe terse.\n<!-- user -->\nTask: {{task_query}}\nReply JSON.")
    with pytest.raises(ConfigError, match="no prompt template reflect-mine2.md"):
        LiteLLMTeacher(LiteLLMTeacherOptions(model="scripted/x", prompt_version="mine2"))
    from .teacher_script import good_teacher

    provider = scripted(good_teacher)
    t = LiteLLMTeacher(LiteLLMTeacherOptions(model="scripted/x", prompt_version="mine2", prompt_dir=str(tmp_path), rounds=1))
    ctx = t.reflect(*signalled, seed_task)
    assert provider.calls[0]["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": f"Task: {seed_task.query}\nReply JSON."},
    ]
    cands = t.abstract(env, seed_task, t.explore(env, seed_task, ctx), ctx, set())
    assert cands and all(c.prompt_version == "mine2" for c in cands)


def test_bad_templates_are_rejected_at_construction(tmp_path):
    pkg = TEMPLATES
    for f in pkg.glob("*-v1.md"):
        (tmp_path / f.name.replace("-v1", "-x")).write_text(f.read_text())
    (tmp_path / "judge-x.md").write_text("<!-- system -->\nS\n<!-- user -->\n{{secret_sauce}}")
    with pytest.raises(ConfigError, match="unknown placeholders \\['secret_sauce'\\]"):
        PromptSet("x", tmp_path)
    (tmp_path / "judge-x.md").write_text("no user part")
    with pytest.raises(ConfigError, match="no '<!-- user -->' line"):
        PromptSet("x", tmp_path)
    with pytest.raises(ConfigError, match="is not a folder"):
        PromptSet("v1", tmp_path / "missing")


# ------------------------------------------------------------------------------ options
def test_options_are_strict_and_never_hold_a_key(monkeypatch):
    with pytest.raises(ValidationError, match="extra"):
        LiteLLMTeacherOptions(api_key="sk-abc")
    with pytest.raises(ValidationError, match="NAME of an environment variable"):
        LiteLLMTeacherOptions(api_key_env="sk-abc123")
    with pytest.raises(ValidationError, match="completion_kwargs may not set"):
        LiteLLMTeacherOptions(completion_kwargs={"api_key": "sk"})
    with pytest.raises(ValidationError):
        LiteLLMTeacherOptions(budget={"max_calls": -1})
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE"):
        LiteLLMTeacher(LiteLLMTeacherOptions(api_key_env="NOT_SET_ANYWHERE"))
    o = LiteLLMTeacherOptions.model_validate({"model": "hosted_vllm/Qwen/Qwen3-8B", "api_base": "http://localhost:8000/v1", "rounds": 4, "budget": {"max_calls": 100}})
    assert o.rounds == 4 and o.budget.max_calls == 100


def test_registered_and_importing_the_sdk_never_imports_litellm():
    code = (
        "import sys, coevolve_sdk, coevolve_litellm.teacher as m\n"
        "from coevolve_sdk.components.registry import get_registry\n"
        "r = get_registry()\n"
        "assert r.get('teacher', 'litellm') is m.LiteLLMTeacher, r\n"
        "assert r.info('teacher', 'litellm').distribution == 'coevolve-litellm', r.info('teacher', 'litellm')\n"
        "t = m.LiteLLMTeacher()\n"
        "assert 'litellm' not in sys.modules, 'litellm imported eagerly'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
