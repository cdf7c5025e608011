"""Parsers and the state grader: pure Python, no AppWorld needed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coevolve_appworld.code import NoCodeError, api_calls, call_arguments, extract_code, fence
from coevolve_appworld.grading import answers_match, goal_completion, grade_outcome

ident = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True).filter(lambda s: s not in {"if", "in", "is", "or", "as", "def", "for", "and", "not", "del", "try"})


@given(st.lists(st.tuples(ident, ident), min_size=0, max_size=6))
def test_api_calls_are_found_in_source_order(pairs):
    code = "\n".join(f"x{i} = apis.{a}.{b}(k=1)" for i, (a, b) in enumerate(pairs))
    assert api_calls(code) == [f"{a}.{b}" for a, b in pairs]


@given(st.text(max_size=200))
@settings(max_examples=200)
def test_api_calls_never_raise_on_arbitrary_text(text):
    assert isinstance(api_calls(text), list)


@given(st.text(max_size=300))
@settings(max_examples=200)
def test_extract_code_returns_code_or_refuses(text):
    try:
        code = extract_code(text)
    except NoCodeError as e:
        assert str(e)
    else:
        assert isinstance(code, str) and code.strip()


def test_nested_calls_and_non_api_calls():
    code = "print(apis.spotify.show_playlist(playlist_id=apis.spotify.create_playlist(title='a')['id']))\nlen([])\nfoo.bar.baz()"
    assert api_calls(code) == ["spotify.show_playlist", "spotify.create_playlist"]
    assert api_calls("def f(:") == []


def test_extract_code_formats():
    assert extract_code("Let me look.\n```python\nprint(1)\n```\nand\n```\nprint(2)\n```") == "print(1)\nprint(2)"
    call = '<tool_call>{"name": "execute_python", "arguments": {"code": "print(3)"}}</tool_call>'
    assert extract_code(call) == "print(3)"
    with pytest.raises(NoCodeError, match="unknown tool"):
        extract_code('<tool_call>{"name": "shell", "arguments": {"code": "ls"}}</tool_call>')
    with pytest.raises(NoCodeError, match="No code found"):
        extract_code("I think the answer is 4.")
    assert extract_code(fence("x = 1")) == "x = 1"


def test_call_arguments_reads_literals_only():
    code = "apis.simple_note.create_note(title='Plan', content=secret(), pinned=True, access_token=tok)"
    assert call_arguments(code) == [("simple_note.create_note", {"title": "Plan", "pinned": True})]


def _row(**kw):
    return {"id": 9, "created_at": "2023-01-01T00:00:00", **kw}


def test_grade_outcome_matches_and_mismatches():
    ref = {"changes": {"simple_note.Note": {"added": [_row(title="A", user_id=1)], "removed": [], "updated": []}}, "answer": None}
    same_other_id = {"changes": {"simple_note.Note": {"added": [{**_row(title="A", user_id=1), "id": 4}], "removed": [], "updated": []}}}
    assert grade_outcome(ref, same_other_id).score == 1.0
    nothing = {"changes": {}, "answer": None}
    r = grade_outcome(ref, nothing)
    assert r.score == 0.0 and r.failures
    extra = json.loads(json.dumps(same_other_id))
    extra["changes"]["spotify.Playlist"] = {"added": [_row(title="B")], "removed": [], "updated": []}
    assert grade_outcome(ref, extra).score == 0.0  # collateral changes fail


def test_grade_outcome_answer_and_bookkeeping_updates():
    ref = {"changes": {}, "answer": 2}
    assert grade_outcome(ref, {"changes": {}, "answer": 2.0}).score == 1.0
    assert grade_outcome(ref, {"changes": {}, "answer": "2"}).score == 1.0
    assert grade_outcome(ref, {"changes": {}, "answer": 3}).score == 0.0
    login_only = {"changes": {"spotify.User": {"added": [], "removed": [], "updated": [
        {"id": 1, "before": {"last_logged_in": None}, "after": {"last_logged_in": "2023"}}]}}, "answer": 2}
    assert grade_outcome(ref, login_only).score == 1.0
    assert answers_match("Paris ", "paris") and not answers_match([1, 2], [2, 1])


def test_goal_completion():
    m = goal_completion({"a1_1": True, "a1_2": True, "a1_3": False, "b2_1": True})
    assert m["task_goal_completion"] == 0.75 and m["scenario_goal_completion"] == 0.5
