"""Issue 19 (1b): no admitted task may repeat the request of a held-out evaluation task.

A small explorer with the world's own templater proposes a test request verbatim now and then
(1.5-2.5% of validated proposals in an audit); a task trained on verbatim would inflate the
held-out score. Whatever the teacher, validation rejects such a candidate with a reason of its
own, counted in the round's record, also in a seed pool explored by the teacher."""

from __future__ import annotations

from pathlib import Path

from coevolve_sdk.config import ComponentConfig, RunConfig
from coevolve_sdk.evolution.rounds import Evolver
from coevolve_sdk.evolution.scheduler import EvolutionScheduler
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.evolution.pool import TaskPool
from coevolve_sdk.evolution.teacher import RandomExplorer
from coevolve_sdk.records import CandidateTask, Signal, Step, Trajectory
from coevolve_sdk.evolution.validation import EVAL_REQUEST_REASON, Validator, evaluation_requests, normalise_request
from coevolve_warehouse.env import WarehouseEnv


class LeakyExplorer(RandomExplorer):
    """The random explorer, except that its first candidate of every exploration asks a test
    request (case and punctuation changed), as an LLM teacher that read the benchmark might."""

    name = "leaky-explorer"

    def abstract(self, env, task, triplets, context, existing):  # type: ignore[no-untyped-def]
        out = super().abstract(env, task, triplets, context, existing)
        test = WarehouseEnv().tasks("test")
        if out:
            leak = test[len(task.id) % len(test)]
            out[0] = out[0].model_copy(update={"query": "  " + leak.query.upper() + ".", "id": out[0].id + "-leak"})
        return out


def test_normalised_requests_compare_equal() -> None:
    assert normalise_request("Count the  nuts\nin bin B.") == normalise_request("count the nuts in bin b!?") == "count the nuts in bin b"
    assert normalise_request("count the nuts in bin B") != normalise_request("count the bolts in bin B")


def test_a_candidate_asking_a_test_request_is_rejected_with_its_own_reason() -> None:
    env = WarehouseEnv()
    test = env.tasks("test")[3]
    validator = Validator(held_out=evaluation_requests(env, ["test"]))
    cand = CandidateTask(query=test.query.lower() + " ", reference_actions=list(test.reference_actions))
    verdict, task = validator.validate(env, cand, None, set())
    assert task is None and verdict.reason.startswith(EVAL_REQUEST_REASON), verdict.reason
    assert "test/" + test.id in verdict.reason
    # the same actions under a request of no evaluation task are judged on their replay as before
    ok = CandidateTask(query="a request of no split", reference_actions=list(test.reference_actions))
    assert not validator.validate(env, ok, None, set())[0].reason.startswith(EVAL_REQUEST_REASON)


def _config(tmp_path: Path, **pool) -> RunConfig:
    return RunConfig(run_dir=str(tmp_path), environment=ComponentConfig(name="warehouse"), policy=ComponentConfig(name="tiny"),
                     algorithm=ComponentConfig(name="grpo"), pool=pool or {})  # type: ignore[arg-type]


def test_rounds_and_an_explored_seed_pool_reject_and_count_test_requests(tmp_path: Path) -> None:
    cfg = _config(tmp_path, seed_tasks=6, seed_source="explore")
    store = RunStore(tmp_path / "run.sqlite")
    pool = TaskPool(store)
    teacher = LeakyExplorer(LeakyExplorer.Options(rounds=2, steps_per_round=3, max_actions=3, max_candidates=2))
    sched = EvolutionScheduler.for_run(cfg, teacher, WarehouseEnv, store, pool, ["boundary"], log=lambda m: None,
                                       on_admitted=lambda s, t: None, on_proposed=lambda s, c: None)
    evolver: Evolver = sched.evolver
    assert len(evolver.validator.held_out) == len(WarehouseEnv().tasks("test"))  # the whole split, from the config
    test_requests = set(evolver.validator.held_out)

    bases = WarehouseEnv().tasks("train")[:6]
    found, stats = evolver.seed_pool(bases, 6, set())
    assert stats["rejected"].get(EVAL_REQUEST_REASON, 0) > 0, stats
    assert not {normalise_request(t.query) for t in found} & test_requests

    signals, trajs = [], {}
    for t in bases:
        tr = Trajectory(task_id=t.id, steps=[Step(action=a, observation="") for a in t.reference_actions[:-1]])
        trajs[tr.id] = tr
        signals.append(Signal(kind="boundary", task_id=t.id, trajectory_id=tr.id, step=5))
    res = evolver.run_round(1, 5, signals, trajs, {t.id: t for t in bases}, set())
    assert res.rejection_reasons.get(EVAL_REQUEST_REASON, 0) > 0, res.rejection_reasons
    assert not {normalise_request(t.query) for t in res.accepted} & test_requests
    assert store.rounds()[0]["rejection_reasons"][EVAL_REQUEST_REASON] == res.rejection_reasons[EVAL_REQUEST_REASON]
