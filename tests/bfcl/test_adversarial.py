"""Property test: malformed and adversarial agent messages never crash the environment.

More than 10,000 generated actions (bad JSON, unknown or private function names, wrong argument
types, missing/extra arguments, oversized messages, non-finite and huge numbers, deep nesting,
python code that tries to import, open, exec or reach object internals) are sent to live
episodes. For each: ``step`` returns normally, the environment itself reported an error
(``act`` did not raise into the base class's safety net), nothing adversarial was executed
(a valid call in the same message may run, as in BFCL), and
``eval``/``exec`` were never called. A sentinel file that the injected code tries to create
must not exist afterwards.
"""

from __future__ import annotations

import ast
import builtins
import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coevolve_bfcl import _bfcl
from coevolve_bfcl.calls import SCHEMA_QUIRKS

from .helpers import make_env

N_EXAMPLES = 10_500
TASK_IDS = ["multi_turn_base_0", "multi_turn_base_60", "multi_turn_base_110", "multi_turn_base_150"]


def _known_functions() -> dict[str, dict]:
    docs = {}
    for c in _bfcl.CLASSES:
        for d in _bfcl.func_docs(c):
            docs[d["name"]] = d
    return docs


DOCS = _known_functions()
WITH_PARAMS = sorted(n for n, d in DOCS.items() if d["parameters"]["properties"])

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                         st.text(max_size=30))
json_values = st.recursive(json_scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), c, max_size=4)),
                           max_leaves=12)


def _block(obj_text: str) -> str:
    return f"<tool_call>{obj_text}</tool_call>"


def _wrong_value(t: str) -> st.SearchStrategy:
    # values of a JSON type the parameter does not accept
    wrong = {
        "string": st.one_of(st.integers(), st.booleans(), st.lists(st.text(max_size=4), max_size=2), st.none()),
        "integer": st.one_of(st.text(max_size=10), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                             st.lists(st.integers(), max_size=2), st.none()),
        "float": st.one_of(st.text(max_size=10), st.booleans(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                           st.none()),
        "boolean": st.one_of(st.integers(), st.text(max_size=10), st.floats(allow_nan=False), st.none()),
        "array": st.one_of(st.text(max_size=10), st.integers(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                           st.none()),
        "dict": st.one_of(st.text(max_size=10), st.integers(), st.lists(st.integers(), max_size=2), st.none()),
    }
    return wrong.get(t, st.just(object()))


@st.composite
def wrong_type_call(draw):
    name = draw(st.sampled_from(WITH_PARAMS))
    props = DOCS[name]["parameters"]["properties"]
    target = draw(st.sampled_from(sorted(props)))
    args = {p: "x" for p in DOCS[name]["parameters"].get("required", [])}
    args[target] = draw(_wrong_value(props[target]["type"]))
    if args[target] is None and target not in DOCS[name]["parameters"].get("required", []):
        args[target] = 12345 if props[target]["type"] != "integer" else "12345"
    if "string" in SCHEMA_QUIRKS.get((name, target), ()) and isinstance(args[target], str):
        args[target] = [args[target]]  # the data's own quirk makes a string legal here: a list is wrong for both
    if draw(st.booleans()):
        return _block(json.dumps({"name": name, "arguments": args}))
    return "[" + name + "(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")]"


@st.composite
def unknown_function(draw):
    name = draw(st.one_of(
        st.text(min_size=1, max_size=20).filter(lambda s: s not in DOCS),
        st.sampled_from(["__import__", "exec", "eval", "open", "compile", "_load_scenario", "__init__", "__class__",
                         "globals", "getattr", "system", "kill", "exit", "run", "breakpoint", "input"]),
    ))
    args = draw(st.dictionaries(st.text(max_size=10), json_values, max_size=3))
    return _block(json.dumps({"name": name, "arguments": args}))


@st.composite
def missing_or_extra(draw):
    name = draw(st.sampled_from(sorted(DOCS)))
    required = DOCS[name]["parameters"].get("required", [])
    args = {p: "x" for p in required}
    if required and draw(st.booleans()):
        args.pop(draw(st.sampled_from(required)))
    else:
        extra = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in DOCS[name]["parameters"]["properties"]))
        args[extra] = draw(json_values)
    return _block(json.dumps({"name": name, "arguments": args}))


bad_json = st.one_of(
    st.text(max_size=200).map(lambda s: _block("{" + s)),
    st.text(max_size=200).map(lambda s: _block(s) if s.strip()[:1] not in ("{",) else _block("[" + s)),
    st.just(_block("")), st.just("<tool_call>"), st.just(_block("null")), st.just(_block("[1, 2]")),
    st.just(_block('{"name": 5}')), st.just(_block('{"name": "cd", "arguments": "folder"}')),
    st.just(_block('{"name": "cd", "arguments": [1]}')),
    st.integers(1, 3000).map(lambda n: _block('{"name": "cd", "arguments": ' + "[" * n + "]" * n + "}")),
    st.integers(1, 3000).map(lambda n: _block("[" * n)),
)


def _huge(n: int, kind: int) -> str:
    if kind == 0:
        return _block(json.dumps({"name": "echo", "arguments": {"content": "A" * n, "file_name": "f.txt"}}))
    if kind == 1:
        return "[echo(content='" + "B" * n + "')]"
    return "word " * (n // 5 + 1)


huge = st.builds(_huge, st.integers(20_001, 80_000), st.integers(0, 2))

numbers = st.one_of(
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]).map(
        lambda v: _block('{"name": "add", "arguments": {"a": ' + v + ', "b": 1}}')),
    st.integers(min_value=10**15 + 1, max_value=10**300).map(
        lambda v: _block(json.dumps({"name": "power", "arguments": {"base": v, "exponent": 2}}))),
    st.integers(min_value=10_001, max_value=10**12).map(
        lambda v: _block(json.dumps({"name": "power", "arguments": {"base": 10, "exponent": v}}))),
    st.integers(min_value=1001, max_value=10**9).map(lambda v: f"[logarithm(value=10, base=2, precision={v})]"),
    st.integers(4301, 9000).map(lambda n: "[tail(file_name='a', lines=" + "9" * n + ")]"),
)


def code_injection(sentinel: str) -> st.SearchStrategy:
    templates = [
        "[__import__('os').system('touch {s}')]",
        "[open('{s}', 'w')]",
        "[exec(\"open('{s}', 'w')\")]",
        "[eval(\"__import__('os').system('touch {s}')\")]",
        "[cd(folder=open('{s}', 'w'))]",
        "[cd(folder=__import__('os').system('touch {s}'))]",
        "[ls(a=(lambda: open('{s}', 'w'))())]",
        "[cd(folder=[c for c in ().__class__.__bases__[0].__subclasses__()])]",
        "[os.system('touch {s}')]",
        "[cd(folder='x')] + [open('{s}', 'w')]",
        "[cd(folder='x'), open('{s}', 'w')]",
        "[cd(**{{'folder': open('{s}', 'w')}})]",
        "[cd(*[open('{s}', 'w')])]",
        "[cd(folder=f\"{{open('{s}', 'w')}}\")]",
        "[cd(folder='a' + open('{s}').read())]",
        "[touch(file_name=__file__)]",
        "```python\nimport os; os.system('touch {s}')\n```",
        "[globals()['__builtins__'].open('{s}', 'w')]",
        "[getattr(__builtins__, 'open')('{s}', 'w')]",
        "[_load_scenario({{}})]",
        "[cd(folder={{1, 2}})]",
        "[cd(folder=b'bytes')]",
        "[cd(folder=1j)]",
        "[cd(folder='x'); import os]",
        "[cd(folder='" + "(" * 300 + "')]" + ")" * 300,
        "[" + "cd(folder=" * 150 + "'x'" + ")" * 150 + "]",
    ]
    # a random prefix/suffix keeps each example distinct while staying malformed
    return st.builds(lambda t, pad: (pad + t.format(s=sentinel)) if t.startswith("[") and pad.isspace() else t.format(s=sentinel),
                     st.sampled_from(templates), st.sampled_from(["", " ", "\n", "  \n"]))


def adversarial(sentinel: str) -> st.SearchStrategy:
    return st.one_of(bad_json, unknown_function(), wrong_type_call(), missing_or_extra(), huge, numbers,
                     code_injection(sentinel))


#: The only well-formed calls the generators put next to adversarial ones.
VALID_PARTS = {"cd(folder='x')"}


def _flat(model_calls: list[list[list[str]]]) -> list[str]:
    return [c for turn in model_calls for step in turn for c in step]


class _NoCode:
    """Replaces builtins.eval/exec while an action is handled; any use is recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __enter__(self):
        self._eval, self._exec = builtins.eval, builtins.exec

        def guard(name):
            def f(*a, **k):
                self.calls.append(f"{name}({str(a[0])[:80] if a else ''})")
                raise RuntimeError(f"{name} called")
            return f

        builtins.eval, builtins.exec = guard("eval"), guard("exec")
        return self

    def __exit__(self, *exc):
        builtins.eval, builtins.exec = self._eval, self._exec
        return False


def test_ten_thousand_adversarial_actions(tmp_path: Path):
    sentinel = str(tmp_path / "PWNED")
    env = make_env(max_steps=100_000, max_steps_per_turn=100_000)
    tasks = {t.id: t for t in env.tasks("all") if t.id in TASK_IDS}
    assert len(tasks) == len(TASK_IDS)
    seen: list[int] = []
    state = {"task": None}

    @settings(max_examples=N_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(action=adversarial(sentinel), task_id=st.sampled_from(TASK_IDS))
    def run(action: str, task_id: str) -> None:
        if env.done or state["task"] != task_id:
            env.reset(options={"task": tasks[task_id]})
            state["task"] = task_id
        before = env.model_calls()
        with _NoCode() as guard:
            obs, reward, term, trunc, info = env.step(action)
        assert guard.calls == [], guard.calls
        assert isinstance(obs, str) and obs
        assert info.get("error"), (action[:200], info)
        assert "traceback" not in info, info.get("traceback")  # act() handled it itself
        assert not term and reward == 0.0
        ran_before, ran_after = _flat(before), _flat(env.model_calls())
        assert ran_after[: len(ran_before)] == ran_before
        # A valid call next to an adversarial one runs (BFCL's way); nothing else ever does.
        assert set(ran_after[len(ran_before):]) <= VALID_PARTS, "an adversarial action was executed"
        seen.append(1)

    run()
    assert len(seen) >= 10_000
    assert not Path(sentinel).exists()


def test_checker_only_evaluates_canonical_calls():
    """BFCL's checker eval()s call strings; ours are always `method(k=<literal>, ...)`."""
    env = make_env()
    evaluated: list[str] = []
    real_eval = builtins.eval

    def checking_eval(src, *a, **k):
        caller = sys._getframe(1)
        if isinstance(src, str) and "_ground_truth_eval_" not in src.split("(", 1)[0]:
            tree = ast.parse(src, mode="eval").body
            assert isinstance(tree, ast.Call) and isinstance(tree.func, ast.Attribute), src
            assert isinstance(tree.func.value, ast.Name) and not tree.args, src
            for kw in tree.keywords:
                ast.literal_eval(kw.value)  # raises if the argument is anything but a literal
            evaluated.append(src)
        if not a:  # evaluate in the caller's namespace, as a bare eval() there would
            return real_eval(src, caller.f_globals, caller.f_locals)
        return real_eval(src, *a, **k)

    tasks = [t for t in env.tasks("all")][:25]
    builtins.eval = checking_eval
    try:
        for t in tasks:
            assert env.replay(t, t.reference_actions).score == 1.0
    finally:
        builtins.eval = real_eval
    assert len(evaluated) > 50
