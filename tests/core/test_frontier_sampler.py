"""The `frontier` sampler: tasks the agent solved in every one of its latest tries are drawn less
often (or not at all), from the run's own outcome history, and a killed run resumes to the same
draws."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from coevolve_sdk.evolution.pool import FrontierSampler
from coevolve_sdk.evolution.signals import CompetenceHistory
from coevolve_sdk.records import Task
from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import rows, write_config


def _history(outcomes: dict[str, list[bool]]) -> CompetenceHistory:
    h = CompetenceHistory()
    for task_id, oks in outcomes.items():
        for i, ok in enumerate(oks):
            h.record(task_id, i, 1.0 if ok else 0.0, ok)
    return h


def test_weights_follow_the_last_window_of_outcomes() -> None:
    tasks = [Task(env="e", query=f"q{i}") for i in range(4)]
    s = FrontierSampler({"window": 3, "solved_weight": 0.1, "failed_weight": 0.5})
    assert [s.weight(t) for t in tasks] == [1.0] * 4  # no history attached: uniform
    s.attach_history(_history({tasks[0].id: [False, True, True, True],  # last 3 solved
                               tasks[1].id: [True, False, False, False],  # last 3 failed
                               tasks[2].id: [True, False, True],  # mixed
                               tasks[3].id: [True, True]}))  # fewer tries than the window
    assert [s.weight(t) for t in tasks] == [0.1, 0.5, 1.0, 1.0]


def test_mastered_tasks_wait_until_the_others_run_out_and_draws_follow_the_rng() -> None:
    tasks = [Task(env="e", query=f"q{i}") for i in range(6)]
    s = FrontierSampler({"window": 2, "solved_weight": 0.0})
    s.attach_history(_history({t.id: [True, True] for t in tasks[:3]}))
    fresh = {t.id for t in tasks[3:]}
    for seed in range(20):
        batch = s.sample(tasks, 3, np.random.default_rng(seed), 1)
        assert {t.id for t in batch} == fresh  # without replacement, the three unmastered ones
        five = s.sample(tasks, 5, np.random.default_rng(seed), 1)
        assert len({t.id for t in five}) == 5 and fresh <= {t.id for t in five}
    assert s.sample(tasks, 4, np.random.default_rng(7), 1) == s.sample(tasks, 4, np.random.default_rng(7), 1)
    # every task mastered and weight 0: the draw is uniform rather than empty
    s.attach_history(_history({t.id: [True, True] for t in tasks}))
    assert len({t.id for t in s.sample(tasks, 6, np.random.default_rng(0), 1)}) == 6
    # a pool smaller than the batch is drawn with replacement, by weight
    s.attach_history(_history({tasks[0].id: [True, True]}))
    assert tasks[0] not in s.sample(tasks[:2], 8, np.random.default_rng(0), 1)


def test_a_share_of_the_batch_for_synthetic_tasks() -> None:
    seed = [Task(env="e", query=f"s{i}") for i in range(10)]
    synth = [Task(env="e", query=f"y{i}", origin="synthetic") for i in range(4)]
    s = FrontierSampler({"synthetic_share": 0.5, "solved_weight": 0.0, "window": 1})
    s.attach_history(_history({synth[0].id: [True]}))
    batch = s.sample(seed + synth, 6, np.random.default_rng(0), 1)
    assert sum(t.origin == "synthetic" for t in batch) == 3 and synth[0] not in batch


def _draws(db: Path) -> dict[int, list[str]]:
    out: dict[int, list[str]] = defaultdict(list)
    for step, task_id in rows(db, "SELECT step, task_id FROM trajectories WHERE phase = 'train' ORDER BY step, rowid"):
        out[step].append(task_id)
    return dict(out)


@pytest.mark.slow
def test_a_run_skips_what_it_cannot_learn_from_and_resumes_to_the_same_draws(tmp_path: Path, sub_env: dict[str, str]) -> None:
    """The toy agent of tests/core/toy_plugin.py fails most groups outright: with
    ``failed_weight: 0`` a task whose last group (4 tries) all failed waits until the other
    tasks cannot fill a step; the draws follow the run's history and seed exactly across a kill."""
    sampler = {"name": "frontier", "options": {"window": 4, "failed_weight": 0.0}}
    (tmp_path / "a").mkdir()
    cfg = write_config(tmp_path / "a", **{"pool.sampler": sampler})
    done = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert done.returncode == 0, done.stderr
    db = tmp_path / "a" / "run" / "run.sqlite"
    draws = _draws(db)
    by_step: dict[int, list[tuple[str, bool]]] = defaultdict(list)
    for step, task_id, ok in rows(db, "SELECT step, task_id, success FROM trajectories WHERE phase = 'train' ORDER BY step, rowid"):
        by_step[step].append((task_id, bool(ok)))
    admitted = {tid: (step if origin == "synthetic" else 0) for tid, origin, step in rows(db, "SELECT id, origin, step_admitted FROM tasks")}
    outcomes: dict[str, list[bool]] = defaultdict(list)
    held_back = 0
    for step in sorted(by_step):
        blocked = {t for t, oks in outcomes.items() if len(oks) >= 4 and not any(oks[-4:])}
        available = {t for t, s in admitted.items() if s is not None and s < step}
        drawn = set(draws[step])
        if drawn & blocked:  # only when the other tasks could not fill the step
            assert len(available - blocked) < 4, (step, drawn & blocked, available - blocked)
        held_back += len(blocked & available)
        for t, ok in by_step[step]:
            outcomes[t].append(ok)
    assert held_back > 0, "no task ever had a failed group: the test would not see the sampler at work"

    # killed after its fifth step and resumed: the same tasks at every step
    (tmp_path / "b").mkdir()
    cfg_b = write_config(tmp_path / "b", **{"pool.sampler": sampler})
    env = dict(sub_env, COEVOLVE_TEST_KILL_AT="step_recorded:5")
    killed = subprocess.run([*coevolve_cmd(), "run", str(cfg_b), "-q"], capture_output=True, text=True, env=env, timeout=300)
    assert killed.returncode != 0
    resumed = subprocess.run([*coevolve_cmd(), "run", "--resume", str(tmp_path / "b" / "run"), "-q"], capture_output=True, text=True,
                             env=sub_env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert _draws(tmp_path / "b" / "run" / "run.sqlite") == draws
    assert json.loads(rows(db, "SELECT value FROM meta WHERE key='status'")[0][0]) == "finished"
    # the uniform draw of the same run does draw such tasks: the difference is the sampler's
    (tmp_path / "c").mkdir()
    uniform = subprocess.run([*coevolve_cmd(), "run", str(write_config(tmp_path / "c")), "-q"], capture_output=True, text=True,
                             env=sub_env, timeout=300)
    assert uniform.returncode == 0, uniform.stderr
    assert _draws(tmp_path / "c" / "run" / "run.sqlite") != draws
