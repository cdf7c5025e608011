"""The warehouse world: fixed splits, a test split that needs what the seed pool under-covers,
grading with partial credit, and tasks found by exploration that validate."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.authoring.check import check_env
from coevolve_sdk.records import CandidateTask, ExplorationContext, Step
from coevolve_sdk.evolution.validation import Validator
from coevolve_sdk.evolution.variation import vary_actions
from coevolve_warehouse import world
from coevolve_warehouse.env import WarehouseEnv


@pytest.fixture(scope="module")
def env() -> WarehouseEnv:
    return WarehouseEnv()


def _digest(tasks) -> str:
    return hashlib.sha256(json.dumps([[t.query, t.reference_actions, t.payload] for t in tasks], sort_keys=True).encode()).hexdigest()[:16]


def test_splits_are_fixed_and_disjoint(env: WarehouseEnv) -> None:
    # The held-out split is fixed before any run: regenerating it gives the same tasks, and
    # changing the generator would change this digest (update it only with a new world version).
    again = WarehouseEnv()
    for split in ("train", "dev", "test"):
        assert _digest(env.tasks(split)) == _digest(again.tasks(split))
    train = {t.fingerprint() for t in env.tasks("train")}
    dev = {t.fingerprint() for t in env.tasks("dev")}
    test = {t.fingerprint() for t in env.tasks("test")}
    assert not (train & test) and not (dev & test) and not (train & dev)
    # nor do two splits share a request text (each on its own stock would still be the same words)
    queries = {s: {t.query for t in env.tasks(s)} for s in ("train", "dev", "test")}
    assert not (queries["train"] & queries["test"]) and not (queries["dev"] & queries["test"]) and not (queries["train"] & queries["dev"])
    assert len(env.tasks("test")) == 1024 and len(env.tasks("dev")) == 512


def test_test_split_needs_what_the_seed_pool_under_covers(env: WarehouseEnv) -> None:
    def state_share(tasks) -> float:
        return sum(any(s in world.STATE_SKILLS for s in t.payload["skills"]) for t in tasks) / len(tasks)

    assert state_share(env.tasks("test")) == 1.0
    assert state_share(env.tasks("train")[:128]) < 0.2


def test_every_reference_solves_its_task_and_doing_nothing_scores_zero(env: WarehouseEnv) -> None:
    for split in ("train", "dev", "test"):
        for t in env.tasks(split)[:64]:
            assert env.replay(t, t.reference_actions).score == 1.0, t.query
            env.reset(options={"task": t})
            env.step("I am done.")
            assert env.score() == 0.0 and not env.score() >= env.success_threshold


def test_partial_credit_counts_goals_and_breakage() -> None:
    initial = {"A": {"bolts": 3}, "B": {"nuts": 2}}
    expected = {"A": {}, "B": {"nuts": 2, "bolts": 3}}
    assert world.grade(initial, expected, expected, None, None) == (1.0, [])
    half, failed = world.grade(initial, expected, {"A": {}, "B": {"nuts": 2}}, None, None)
    assert half == 0.5 and failed == ["B/bolts: 0 instead of 3"]
    # an answer counts as one goal; the number must appear on its own
    assert world.grade(initial, initial, initial, 3, "There are 3 bolts.")[0] == 1.0
    assert world.grade(initial, initial, initial, 3, "There are 13 bolts.")[0] == 0.0
    # breaking something else costs that check
    score, _ = world.grade(initial, expected, {"A": {}, "B": {"bolts": 3}}, None, None)
    assert score == pytest.approx(2 / 3)  # both goals met, the nuts broken


def test_describe_recognises_the_state_skills() -> None:
    c = world.Call
    steps = [(c("count", {"item": "nuts", "bin": "B"}), "2"), (c("remove", {"n": 2, "item": "nuts", "bin": "B"}), "ok"),
             (c("count", {"item": "bolts", "bin": "A"}), "3"), (c("move", {"n": 3, "item": "bolts", "src": "A", "dst": "C"}), "ok"),
             (c("add", {"n": 1, "item": "gears", "bin": "D"}), "ok"), (c("count", {"item": "gears", "bin": "D"}), "1")]
    query, answer = world.describe_calls(steps, max_skills=4)
    assert query == ("Take all the nuts out of bin B, then move all the bolts from bin A to bin C, then put 1 gears in bin D, "
                     "then tell me how many gears are in bin D.")
    assert answer == 1
    # taking fewer than were counted is not "all"
    query, _ = world.describe_calls([(c("count", {"item": "nuts", "bin": "B"}), "2"), (c("remove", {"n": 1, "item": "nuts", "bin": "B"}), "ok")])
    assert query == "Take 1 nuts out of bin B."


def test_describe_phrases_only_requests_of_the_language() -> None:
    """An explored sequence that would need more skills than a request names (or no call at all)
    is not phrased; validation then rejects the candidate as an empty query."""
    c = world.Call
    three = [(c("add", {"n": 1, "item": "gears", "bin": "D"}), "ok"), (c("remove", {"n": 1, "item": "nuts", "bin": "B"}), "ok"),
             (c("add", {"n": 2, "item": "tiles", "bin": "A"}), "ok")]
    assert world.describe_calls(three) == ("", None)
    assert world.describe_calls(three[:2])[0] == "Put 1 gears in bin D, then take 1 nuts out of bin B."
    assert world.describe_calls([]) == ("", None)
    assert all(max(r.skills_per_task) <= world.MAX_SKILLS for r in (world.SEED_RECIPE, world.HELD_OUT_RECIPE))


def test_explored_tasks_validate_by_execution(env: WarehouseEnv) -> None:
    teacher = RandomExplorer(RandomExplorer.Options(rounds=4, steps_per_round=4, max_actions=4, max_candidates=4))
    base = env.tasks("train")[0]
    ctx = ExplorationContext(signal_kind="seed", summary="unguided")
    cands = teacher.abstract(env, base, teacher.explore(env, base, ctx, seed=3), ctx, set())
    assert cands
    for cand in cands:
        verdict, task = Validator().validate(WarehouseEnv(), cand, base, set())
        assert verdict.accepted, verdict.reason
        assert task is not None and env.replay(task, task.reference_actions).score == 1.0


def test_a_made_up_task_that_does_not_do_what_it_says_is_refused(env: WarehouseEnv) -> None:
    base = env.tasks("train")[0]
    b, i = next((b, i) for b in world.BINS for i in base.payload["initial"].get(b, {}))
    have = base.payload["initial"][b][i]
    actions = [format_tool_call("remove", {"n": have + 5, "item": i, "bin": b})] * 3
    verdict, task = Validator().validate(env, CandidateTask(query="Take lots.", reference_actions=actions), base, set())
    assert not verdict.accepted and task is None


def test_passes_the_sdk_contract_checker() -> None:
    report = check_env(WarehouseEnv, max_tasks=64, raise_on_failure=False)
    assert report.ok, str(report)


def test_a_variation_keeps_the_skill_and_changes_the_values(env: WarehouseEnv) -> None:
    clear = next(t for t in env.tasks("train") + env.tasks("dev") + env.tasks("test") if t.payload["skills"] == ["clear"])
    seen_other_values = False
    for seed in range(12):
        steps = vary_actions(env, clear, clear.reference_actions, np.random.default_rng(seed))
        assert [s.ok for s in steps] == [True, True]
        query = env.describe(clear, [Step(action=s.action, observation=s.observation) for s in steps])
        assert query.startswith("Take all the ") and ", then" not in query, query
        seen_other_values |= query != clear.query
        assert env.stock != clear.payload["initial"]
    assert seen_other_values


def test_the_random_explorer_varies_a_signalled_task(env: WarehouseEnv) -> None:
    from coevolve_sdk.records import Signal, Trajectory

    clear = next(t for t in env.tasks("train") + env.tasks("dev") + env.tasks("test") if t.payload["skills"] == ["clear"])
    teacher = RandomExplorer(RandomExplorer.Options(rounds=3, steps_per_round=3, max_actions=3, variation=1.0))
    sig = Signal(kind="boundary", task_id=clear.id, trajectory_id="t", step=1)
    ctx = teacher.reflect(sig, Trajectory(task_id=clear.id), clear)
    assert ctx.focus_actions == clear.reference_actions
    cands = teacher.abstract(env, clear, teacher.explore(env, clear, ctx, seed=0), ctx, set())
    assert cands and all(c.query.startswith("Take all the ") for c in cands), [c.query for c in cands]


def test_variation_alone_proposes_a_three_call_task_again_with_fresh_values(env: WarehouseEnv) -> None:
    """The dev check of evolution.signal_order: weakest: a signalled `move+move_all` task (three
    calls) gave no admitted task of its own composition, because each round's random fourth call
    made the request three skills long, which the world cannot phrase. With variation_alone the
    explorer proposes the variation on its own first: same skills, fresh values (and two bins of
    the template stay two bins: a variation once turned "from bin C to bin D" into "from C to C")."""
    import sys

    from coevolve_sdk.env.actions import calls_in
    from coevolve_sdk.records import Signal, Trajectory

    from tests.conftest import REPO

    sys.path.insert(0, str(REPO / "examples" / "experiments"))
    try:
        from warehouse_analysis import composition
    finally:
        sys.path.pop(0)
    names = lambda actions: [c.name for a in actions for c in calls_in(a)]  # noqa: E731
    weak = [t for t in env.tasks("train") if composition(t.query) in ("move+move_all", "move_all+move")][:6]
    assert weak and all(len(names(t.reference_actions)) == 3 for t in weak)
    options = dict(rounds=2, steps_per_round=4, max_actions=4, max_candidates=2, variation=1.0)  # examples/warehouse-tiny.yaml's
    kept: dict[bool, int] = {}
    for alone in (False, True):
        teacher = RandomExplorer(RandomExplorer.Options(**options, variation_alone=alone))
        kept[alone] = 0
        for i, task in enumerate(weak):
            ctx = teacher.reflect(Signal(kind="boundary", task_id=task.id, trajectory_id="t", step=1), Trajectory(task_id=task.id), task)
            cands = teacher.abstract(env, task, teacher.explore(env, task, ctx, seed=i), ctx, set())
            same = [c for c in cands if composition(c.query) == composition(task.query) and names(c.reference_actions) == names(task.reference_actions)]
            kept[alone] += len(same)
            if alone:
                assert any(c.exploration.get("variation_alone") for c in same), [c.query for c in cands]
                for c in same:  # a real task of the world: it validates by execution on the parent's stock
                    made = env.make_task(c, task)
                    assert env.replay(made, made.reference_actions).score == 1.0
    # without it, only a round whose random fourth call failed gives the composition back
    assert kept[True] >= len(weak) and kept[True] >= 2 * kept[False], kept


def test_a_distinct_variation_never_maps_two_bins_to_one(env: WarehouseEnv) -> None:
    """With distinct=True (teacher.options.variation_alone), "from bin C to bin D" stays two bins."""
    moves = [t for t in env.tasks("train") if "move" in t.payload["skills"] or "move_all" in t.payload["skills"]][:10]
    same_bin = {True: 0, False: 0}
    for distinct in (False, True):
        for i, task in enumerate(moves):
            for seed in range(4):
                steps = vary_actions(env, task, task.reference_actions, np.random.default_rng(100 * i + seed), distinct=distinct)
                same_bin[distinct] += sum("source and destination are the same" in s.observation for s in steps)
    assert same_bin[True] == 0 and same_bin[False] > 0, same_bin


def test_a_request_is_read_back_into_the_skills_it_was_drawn_from(env: WarehouseEnv) -> None:
    for split in ("train", "dev", "test"):
        for t in env.tasks(split):
            assert world.skills_of(t.query) == t.payload["skills"], t.query
    assert world.skills_of("Juggle the bins.") == ["?"]


def test_an_explored_task_records_its_own_skills_not_its_parents(env: WarehouseEnv) -> None:
    # ToolEnv.make_task keeps the parent's payload; a put request explored from a take task
    # was labelled ["take"] before
    parent = next(t for t in env.tasks("train") if t.payload["skills"] == ["take"])
    call = world.Call("add", {"n": 2, "item": world.ITEMS[0], "bin": world.BINS[0]})
    query = world.join_phrases([world.PHRASES["put"].format(**call.args)])
    made = env.make_task(CandidateTask(query=query, reference_actions=[format_tool_call(call.name, call.args)]), parent)
    assert made.payload["skills"] == ["put"]
    assert made.payload["initial"] == parent.payload["initial"]
