"""evolution.admission_probe: a validated task joins the pool only if the agent, as it is at that
step, solves it in some of N sampled tries but not all (a task it always solves or always fails
gives GRPO a group of equal rewards: nothing to learn). What a user relies on: only such tasks
are admitted and the others are counted by reason; the random-exploration arm keeps exploring
until it has as many tasks that pass as the cap; bad settings are named; and the tries leave the
training stream alone, so a run killed after a round and resumed (the round reused from the
store, the tries not run again) ends where an uninterrupted run ends."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from coevolve_sdk.config import RunConfig
from coevolve_sdk.evolution.rounds import Probe
from coevolve_sdk.records import Task
from coevolve_sdk.training.rollout import isolated_torch_rng
from tests.conftest import coevolve_cmd
from tests.core.test_resume_exact import CONFIG, SETTINGS, _compare, _rows, _run, _sets, final_state
from tests.warehouse.scheduler_kit import random_scheduler

TRIES = 4


def _wins(task: Task) -> int:
    """A stand-in for the agent's tries, fixed per request: 0..4 successes of 4."""
    return sum(map(ord, task.query)) % (TRIES + 1)


def _probe(seen: list[str]) -> Probe:
    def tries(tasks: list[Task], step: int, seed: int) -> list[int]:
        seen.extend(t.query for t in tasks)
        return [_wins(t) for t in tasks]

    return Probe(TRIES, tries)


def _round(tmp_path: Path, starts: int, **evolution: object) -> tuple[dict, list[Task], list[str]]:
    sched, store = random_scheduler(tmp_path / "run.sqlite", steps=10, seed_tasks=40, every=5, random_starts=starts,
                                    admission_probe=TRIES, **evolution)
    seen: list[str] = []
    sched.evolver.probe = _probe(seen)
    sched.offer([], [], 5)
    (admission,) = sched.poll(5)
    (rd,) = store.rounds()
    return rd, admission.admitted, seen


def test_only_tasks_the_agent_solves_sometimes_join_and_the_rest_are_counted(tmp_path: Path) -> None:
    rd, admitted, seen = _round(tmp_path, 16)
    assert rd["probed"] == len(seen) > 0 and rd["probe_rollouts"] == TRIES * len(seen)
    assert admitted and all(0 < _wins(t) < TRIES for t in admitted)
    assert all(t.lineage.validation["probe_successes"] == _wins(t) and t.lineage.validation["probe_tries"] == TRIES
               for t in admitted)  # type: ignore[union-attr]
    easy = sum(1 for q in seen if _wins(Task(id="x", env="warehouse", query=q)) == TRIES)
    hard = sum(1 for q in seen if _wins(Task(id="x", env="warehouse", query=q)) == 0)
    assert (rd["too_easy"], rd["too_hard"]) == (easy, hard) and easy + hard > 0
    assert rd["accepted"] == len(admitted) == rd["probed"] - easy - hard
    reasons = rd["rejection_reasons"]
    assert reasons.get("probe: the agent solved it in every try", 0) == easy
    assert reasons.get("probe: the agent solved it in no try", 0) == hard


def test_the_random_arm_explores_on_until_enough_tasks_pass_the_probe(tmp_path: Path) -> None:
    rd, admitted, _ = _round(tmp_path, 4, max_admitted_per_round=5, random_max_starts=60)
    assert len(admitted) == 5 and rd["admission_cap_reached"] is True, rd
    assert rd["too_easy"] + rd["too_hard"] > 0  # without the probe the first batches would have sufficed


def test_the_tries_leave_torch_s_random_stream_where_it_was() -> None:
    import torch

    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    with isolated_torch_rng(11):
        inside = torch.rand(5)
    assert torch.equal(torch.rand(3), expected)
    with isolated_torch_rng(11):
        assert torch.equal(torch.rand(5), inside)  # the tries follow their own seed


@pytest.mark.parametrize("value, mode, words", [(1, "sync", "at least 2"), (4, "async", "needs mode: sync")])
def test_settings_the_probe_cannot_honour_are_named(tmp_path: Path, sub_env: dict[str, str], value: int, mode: str,
                                                      words: str) -> None:
    with pytest.raises(ValueError, match=words):
        RunConfig.model_validate({"run_dir": str(tmp_path), "environment": {"name": "kvstore"}, "policy": {"name": "tiny"},
                                  "algorithm": {"name": "grpo"}, "evolution": {"admission_probe": value, "mode": mode}})
    proc = subprocess.run([*coevolve_cmd(), "run", str(CONFIG), "--set", f"run_dir={tmp_path / 'r'}",
                           "--set", f"evolution.admission_probe={value}", "--set", f"evolution.mode={mode}"],
                          capture_output=True, text=True, env=sub_env, timeout=300)
    assert proc.returncode == 2 and "admission_probe" in proc.stderr and words in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_run_killed_after_a_probed_round_resumes_to_the_uninterrupted_run(tmp_path: Path, sub_env: dict[str, str]) -> None:
    settings = {**SETTINGS, "evolution.mode": "sync", "evolution.admission_probe": 2}
    rng = random.Random(0)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert _run(["run", str(CONFIG), "--set", f"run_dir={whole}", *_sets(settings)], sub_env, None, rng) == 0
    rounds = _rows(whole / "run.sqlite", "SELECT data FROM rounds")
    assert rounds and all('"probe_rollouts": ' in d and '"probed": 0,' not in d for (d,) in rounds), rounds
    assert _rows(whole / "run.sqlite", "SELECT count(*) FROM metrics WHERE key = 'evolution/probe_rollouts'")[0][0] > 0
    # killed right after the first round's tasks were admitted, before the checkpoint: the resume
    # replays that step and reuses the round's stored result, so the tries are not run again
    assert _run(["run", str(CONFIG), "--set", f"run_dir={killed}", *_sets(settings)], sub_env, "after_admission:1", rng) != 0
    assert _run(["run", "--resume", str(killed)], sub_env, None, rng) == 0
    _compare(final_state(whole), final_state(killed))
