"""ToolEnv: tools from typed methods, with schemas, validation, dispatch, errors, sampling,
phrasing, grading and tasks by execution all coming from the base class."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from hypothesis import given, settings, strategies as st
from pydantic import Field

from coevolve_sdk.env.actions import format_tool_call, parse_tool_calls
from coevolve_sdk.env.rubric import Check, Rubric, answer_matches, state_matches
from coevolve_sdk.env.toolenv import ToolEnv, ToolError, call, from_state, parse_docstring, tool
from coevolve_sdk.records import CandidateTask, Task
from coevolve_sdk.evolution.validation import Validator

ROOMS = ["hall", "kitchen", "study"]


class Lamps(ToolEnv):
    """Lamps in rooms: switch them, dim them, read them."""

    name = "test-lamps"

    def setup(self, task: Task) -> None:
        self.lamps: dict[str, int] = dict(task.payload.get("initial", {}))

    def snapshot(self) -> dict[str, int]:
        return self.lamps

    @tool(phrase="turn on the {room} lamp")
    def switch_on(self, room: Annotated[str, from_state(ROOMS)]) -> str:
        """Turn a room's lamp on at full brightness.

        Args:
            room: The room.
        """
        self.lamps[room] = 10
        return "on"

    @tool(phrase="dim the {room} lamp to {level}")
    def dim(self, room: Annotated[str, from_state(lambda env: sorted(r for r, v in env.lamps.items() if v > 0))],
            level: Annotated[int, Field(ge=1, le=9)]) -> int:
        """Dim a lamp that is on.

        Args:
            room: A room whose lamp is on.
            level: The new brightness,
                from 1 to 9.
        """
        if self.lamps.get(room, 0) == 0:
            raise ToolError(f"the {room} lamp is off")
        self.lamps[room] = level
        return level

    @tool(phrase="tell me how bright the {room} lamp is", answers=True)
    def read(self, room: Literal["hall", "kitchen", "study"], unit: str = "level") -> dict[str, int | str]:
        """Read a lamp's brightness.

        Args:
            room: The room.
            unit: How to report it.
        """
        return {"room": room, unit: self.lamps.get(room, 0)}

    @tool(explore=False)
    def explode(self, room: str) -> str:
        """A buggy tool: raises something that is not a ToolError."""
        return {"x": 1}[room]

    @tool(ends_episode=True, phrase="say that the work is finished")
    def finish(self, ok: bool) -> str:
        """Declare the work finished."""
        return "finished"

    def tasks(self, split: str = "train") -> list[Task]:
        if split != "train":  # one task: no held-out split (a test split must not repeat train tasks)
            raise ValueError(f"lamps has only a train split, not '{split}'")
        return [self.build_task("Turn on the hall lamp and dim it to 3.", [call("switch_on", room="hall"), call("dim", room="hall", level=3)],
                                initial={"study": 0}, id="lamps-0")]


def fresh(**initial: int) -> Lamps:
    env = Lamps()
    env.reset(seed=0, options={"task": Task(env="test-lamps", query="q", payload={"initial": initial, "expected": {}})})
    return env


def test_schemas_come_from_signatures_and_docstrings() -> None:
    specs = {t.name: t for t in Lamps().tools()}
    assert list(specs) == ["switch_on", "dim", "read", "explode", "finish"]
    dim = specs["dim"]
    assert dim.description == "Dim a lamp that is on."
    assert dim.parameters["required"] == ["room", "level"]
    assert dim.parameters["properties"]["level"] == {"description": "The new brightness, from 1 to 9.", "maximum": 9, "minimum": 1, "type": "integer"}
    read = specs["read"].parameters
    assert read["properties"]["room"]["enum"] == ROOMS and read["required"] == ["room"]
    assert read["properties"]["unit"]["default"] == "level"
    assert "title" not in json.dumps(specs["read"].as_openai())
    assert specs["finish"].parameters["properties"]["ok"]["type"] == "boolean"


def test_several_calls_in_one_message_run_in_order() -> None:
    env = fresh()
    obs, reward, term, trunc, info = env.step(call("switch_on", room="hall") + "\n" + call("dim", room="hall", level=4) + call("read", room="hall"))
    assert info["tool_names"] == ["switch_on", "dim", "read"]
    assert [m["content"] for m in info["messages"]] == ["on", "4", '{"room": "hall", "level": 4}']
    assert "error" not in info and env.lamps == {"hall": 4} and not term


@pytest.mark.parametrize(
    "action, needle",
    [
        (call("fly", room="hall"), "unknown tool 'fly'; the tools are: switch_on, dim, read, explode, finish"),
        (call("dim", room="hall", level="3"), "argument 'level': Input should be a valid integer"),
        (call("dim", room="hall", level=True), "argument 'level'"),
        (call("dim", room="hall", level=12), "less than or equal to 9"),
        (call("dim", room="hall"), "missing argument 'level'"),
        (call("switch_on", room="hall", colour="red"), "'colour' is not an argument of 'switch_on' (its arguments: room)"),
        (call("read", room="garage"), "argument 'room'"),
        (call("dim", room="study", level=2), "the study lamp is off"),
        ("<tool_call>{not json</tool_call>", "not valid JSON"),
    ],
)
def test_agent_mistakes_become_error_observations(action: str, needle: str) -> None:
    env = fresh(study=0)
    obs, reward, term, trunc, info = env.step(action)
    assert needle in obs and obs.startswith("Error: ") and needle in info["error"]
    assert not term and "tool_bugs" not in info and env.lamps == {"study": 0}


def test_a_buggy_tool_is_reported_and_never_escapes_step() -> None:
    env = fresh()
    obs, _, term, _, info = env.step(call("explode", room="hall") + call("switch_on", room="kitchen"))
    assert obs.startswith("Error: the tool 'explode' failed (KeyError") and not term
    assert info["tool_bugs"] and "KeyError" in info["tool_bugs"][0]
    assert env.lamps == {"kitchen": 10}  # the next call of the message still ran


def test_a_plain_message_ends_the_episode_and_is_the_answer() -> None:
    env = fresh(hall=5)
    env.step(call("read", room="hall"))
    _, reward, term, _, _ = env.step("It is at 5.")
    assert term and env.answer == "It is at 5."


def test_an_ends_episode_tool_ends_it_and_skips_later_calls() -> None:
    env = fresh()
    obs, _, term, _, info = env.step(call("finish", ok=True) + call("switch_on", room="hall"))
    assert term and env.lamps == {}
    assert info["messages"][1]["content"] == "Error: the episode ended before this call"


def test_sample_action_draws_from_the_live_state_and_type_domains() -> None:
    env = fresh()
    seen: dict[str, list[dict]] = {}
    for _ in range(300):
        [c] = parse_tool_calls(env.sample_action())
        seen.setdefault(c.name, []).append(c.arguments)
    assert "dim" not in seen  # no lamp is on: nothing to draw its room from
    assert "explode" not in seen  # explore=False
    assert {a["room"] for a in seen["switch_on"]} == set(ROOMS)
    assert {a["room"] for a in seen["read"]} == set(ROOMS) and all("unit" not in a for a in seen["read"])
    assert {a["ok"] for a in seen["finish"]} == {True, False}
    env.step(call("switch_on", room="kitchen"))
    dims = [c.arguments for c in (parse_tool_calls(env.sample_action())[0] for _ in range(300)) if c.name == "dim"]
    assert dims and {d["room"] for d in dims} == {"kitchen"} and {d["level"] for d in dims} == set(range(1, 10))


def test_sampled_actions_execute_and_are_reproducible() -> None:
    def draw(seed: int) -> list[str]:
        env = Lamps()
        env.reset(seed=seed, options={"task": env.tasks()[0]})
        out = []
        for _ in range(20):
            if env.done:
                break
            a = env.sample_action()
            out.append(a)
            _, _, _, _, info = env.step(a)
            assert "error" not in info, (a, info)
        return out

    assert draw(3) == draw(3) and draw(3) != draw(4)


def test_sample_action_says_which_argument_needs_a_sampler() -> None:
    class NoDomain(ToolEnv):
        def setup(self, task: Task) -> None:
            pass

        @tool
        def note(self, text: str) -> str:
            """Write a note."""
            return text

        def tasks(self, split: str = "train") -> list[Task]:
            return [Task(env="x", query="q")]

    env = NoDomain()
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="argument 'text' has no sampler and no small domain"):
        env.sample_action()


class Loans(ToolEnv):
    def setup(self, task: Task) -> None:
        self.loans = {"ana": ["b1", "b2"], "ben": [], "cy": ["b3"]}

    @tool
    def give_back(self, member: Annotated[str, from_state(lambda env: sorted(m for m, b in env.loans.items() if b))],
                  book: Annotated[str, from_state(lambda env, args: env.loans[args["member"]])]) -> str:
        """Return a borrowed book."""
        if book not in self.loans[member]:
            raise ToolError(f"{member} has not borrowed {book}")
        return "ok"

    def tasks(self, split: str = "train") -> list[Task]:
        return [Task(env="loans", query="q")]


def test_a_sampler_can_depend_on_the_arguments_drawn_before_it() -> None:
    env = Loans()
    env.reset(seed=1)
    pairs = {(c.arguments["member"], c.arguments["book"]) for c in (parse_tool_calls(env.sample_action())[0] for _ in range(200))}
    assert pairs == {("ana", "b1"), ("ana", "b2"), ("cy", "b3")}


def test_describe_phrases_calls_with_templates() -> None:
    env = fresh()
    from coevolve_sdk.records import Step

    steps = [Step(action=call("switch_on", room="hall"), observation=""), Step(action="<tool_call>oops", observation=""),
             Step(action=call("dim", room="hall", level=2) + call("explode", room="x"), observation="")]
    assert env.describe(None, steps) == "Turn on the hall lamp, then dim the hall lamp to 2, then call explode with room=\"x\"."
    assert env.describe(None, []) == "Do nothing."


def test_build_task_records_expected_state_and_answer() -> None:
    env = Lamps()
    t = env.build_task("Turn on the study lamp and tell me.", [call("switch_on", room="study"), call("read", room="study")], initial={})
    assert t.payload == {"initial": {}, "expected": {"study": 10}, "answer": '{"room": "study", "level": 10}'}
    assert t.reference_actions[-1] == 'The answer is {"room": "study", "level": 10}.'
    assert env.replay(t, t.reference_actions).score == 1.0
    assert env.replay(t, t.reference_actions[:-1] + ["It is on."]).score == 0.0  # the answer is missing
    assert env.replay(t, [call("switch_on", room="study"), call("dim", room="study", level=3), t.reference_actions[-1]]).score == 0.0
    plain = env.build_task("Turn on the hall lamp.", [call("switch_on", room="hall")], initial={})
    assert plain.reference_actions[-1] == "Done." and plain.payload["answer"] is None


def test_build_task_names_the_failing_action() -> None:
    env = Lamps()
    with pytest.raises(ValueError, match="reference action 2 fails on the base state: the hall lamp is off"):
        env.build_task("q", [call("switch_on", room="study"), call("dim", room="hall", level=2)], initial={})
    with pytest.raises(ValueError, match="reference action 1 ends the episode but 1 more follow"):
        env.build_task("q", ["I am done.", call("switch_on", room="hall")], initial={})
    with pytest.raises(ValueError, match="reference action 1 is malformed"):
        env.build_task("q", ["<tool_call>{]</tool_call>"], initial={})


def test_building_a_task_does_not_disturb_the_live_episode() -> None:
    env = fresh(hall=2)
    env.build_task("q", [call("switch_on", room="kitchen")], initial={"study": 1})
    assert env.lamps == {"hall": 2} and env.task is not None and env.task.query == "q"


def test_make_task_runs_the_candidate_on_the_parent_state_and_validates() -> None:
    env = Lamps()
    base = env.tasks()[0]
    good = CandidateTask(query="Turn on the study lamp, dim it to 2, then read it.",
                         reference_actions=[call("switch_on", room="study"), call("dim", room="study", level=2), call("read", room="study")])
    task = env.make_task(good, base)
    assert task.origin == "synthetic" and task.payload["initial"] == {"study": 0}
    assert task.payload["expected"] == {"study": 2} and task.reference_actions[-1] == 'The answer is {"room": "study", "level": 2}.'
    verdict, admitted = Validator().validate(Lamps(), good, base, set())
    assert verdict.accepted, verdict.reason
    bad = CandidateTask(query="Dim the study lamp.", reference_actions=[call("dim", room="study", level=2)] * 3)
    with pytest.raises(ValueError, match="fails on the base state: the study lamp is off"):
        env.make_task(bad, base)
    verdict, admitted = Validator().validate(Lamps(), bad, base, set())
    assert not verdict.accepted and "fails on the base state" in verdict.reason and admitted is None
    # a candidate may bring its own starting state: merged into the parent's
    lit = CandidateTask(query="Dim the study lamp to 2.", payload={"initial": {"study": 10}}, reference_actions=[call("dim", room="study", level=2)])
    assert env.make_task(lit, base).payload == {"initial": {"study": 10}, "expected": {"study": 2}, "answer": None}


def test_default_grade_is_state_and_answer() -> None:
    env = Lamps()
    task = env.tasks()[0]
    assert env.replay(task, task.reference_actions).score == 1.0
    assert env.replay(task, [call("switch_on", room="hall"), "Done."]).score == 0.0


class Partial(Lamps):
    name = "test-lamps-partial"
    rubric = Rubric([Check(state_matches, weight=3), Check(lambda env: len(env.steps) <= 3, name="short")])


def test_rubric_weights_and_required_checks() -> None:
    env = Partial()
    task = env.tasks()[0]
    assert env.replay(task, task.reference_actions).score == 1.0
    assert env.replay(task, [call("switch_on", room="hall"), "Done."]).score == pytest.approx(0.25)
    longer = [call("read", room="hall")] * 2 + task.reference_actions
    assert env.replay(task, longer).score == pytest.approx(0.75)
    strict = Rubric([Check(state_matches, required=True)]) + Check(lambda env: 0.5, name="half")
    env.replay(task, task.reference_actions)
    result = strict.evaluate(env)
    assert result.score == pytest.approx(0.75) and result.checks == {"state_matches": 1.0, "half": 0.5}
    env.replay(task, ["Done."])
    assert strict.evaluate(env).failed_required == ["state_matches"] and strict.score(env) == 0.0


def test_rubric_rejects_bad_checks() -> None:
    env = Lamps()
    env.replay(env.tasks()[0], ["Done."])
    with pytest.raises(ValueError, match="rubric check 'big' returned 2"):
        Rubric([Check(lambda e: 2, name="big")]).score(env)
    with pytest.raises(ValueError, match="distinct names"):
        Rubric([state_matches, state_matches])
    with pytest.raises(ValueError, match="weight"):
        Check(answer_matches, weight=-1)


def test_grading_a_task_without_expected_state_says_how_to_fix_it() -> None:
    env = Lamps()
    env.reset(options={"task": Task(env="test-lamps", query="q", payload={"initial": {}})})
    with pytest.raises(ValueError, match="has no payload\\['expected'\\].*build_task"):
        env.score()


def test_tool_definition_mistakes_fail_at_class_creation() -> None:
    with pytest.raises(TypeError, match="argument 'x' has no type hint"):
        class A(ToolEnv):
            @tool
            def t(self, x) -> str:  # type: ignore[no-untyped-def]
                """T."""
                return ""
    with pytest.raises(TypeError, match="'reset' is part of the environment API.*@tool\\(name='reset'\\)"):
        class B(ToolEnv):
            @tool
            def reset(self) -> str:  # type: ignore[override]
                """T."""
                return ""
    with pytest.raises(TypeError, match="two tools are named 'go'"):
        class C(ToolEnv):
            @tool(name="go")
            def a(self) -> str:
                """T."""
                return ""

            @tool(name="go")
            def b(self) -> str:
                """T."""
                return ""
    with pytest.raises(TypeError, match="describes y, which the signature does not have"):
        class D(ToolEnv):
            @tool
            def t(self, x: int) -> str:
                """T.

                Args:
                    y: typo.
                """
                return ""
    with pytest.raises(TypeError, match="phrase 'go to {place}' names place"):
        class E(ToolEnv):
            @tool(phrase="go to {place}")
            def t(self, x: int) -> str:
                """T."""
                return ""


def test_tools_are_inherited_and_can_be_renamed_or_replaced() -> None:
    class More(Lamps):
        name = ""

        @tool(name="reset", phrase="turn every lamp off")
        def reset_all(self) -> str:
            """Turn every lamp off."""
            self.lamps = {r: 0 for r in self.lamps}
            return "all off"

        def explode(self, room: str) -> str:  # no longer a tool
            return ""

    names = [t.name for t in More().tools()]
    assert names == ["switch_on", "dim", "read", "finish", "reset"]
    env = More()
    env.reset(options={"task": Task(env="x", query="q", payload={"initial": {"hall": 3}})})
    assert env.step(call("reset"))[0] == "all off" and env.lamps == {"hall": 0}


def test_parse_docstring_google_and_sphinx() -> None:
    google = """Move things.

    Longer explanation
    on two lines.

    Args:
        src (str): Where from.
        n: How many;
            at least one.

    Returns:
        text: not an argument.
    """
    assert parse_docstring(google) == ("Move things. Longer explanation on two lines.", {"src": "Where from.", "n": "How many; at least one."})
    sphinx = """Move things.

    :param src: Where from.
    :param int n: How many.
    :returns: nothing.
    """
    assert parse_docstring(sphinx) == ("Move things.", {"src": "Where from.", "n": "How many."})
    assert parse_docstring(None) == ("", {})


def test_gymnasium_accepts_a_toolenv() -> None:
    env = Lamps(max_steps=4)
    gym_check_env(env)
    obs, info = env.reset(seed=0)
    assert "Turn on the hall lamp" in obs and [t["function"]["name"] for t in info["tools"]][0] == "switch_on"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200),
                 st.builds(lambda n, a: format_tool_call(n, a), st.sampled_from(["switch_on", "dim", "read", "explode", "finish", "nope", ""]),
                           st.dictionaries(st.sampled_from(["room", "level", "unit", "ok", "x"]),
                                           st.one_of(st.integers(), st.text(max_size=6), st.none(), st.booleans(), st.lists(st.integers(), max_size=2)),
                                           max_size=3))))
def test_no_action_makes_step_raise(action: str) -> None:
    env = fresh(hall=3)
    obs, reward, term, trunc, info = env.step(action)
    assert isinstance(obs, str) and 0.0 <= reward <= 1.0
    if info.get("error"):
        assert "Error" in obs


def test_rng_comes_from_reset_seed() -> None:
    a, b = Lamps(), Lamps()
    a.reset(seed=7)
    b.reset(seed=7)
    assert [a.sample_action() for _ in range(10)] == [b.sample_action() for _ in range(10)]
    assert isinstance(a.np_random, np.random.Generator)
