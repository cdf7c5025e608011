"""The torture test: a real `coevolve run` of the kvstore example (GRPO on the tiny model),
killed with SIGKILL again and again — at every named kill point (during the warm start, around
each evaluation, when a round starts, right after a round's tasks are admitted, in the middle
of a checkpoint write) and at random moments — and resumed each time with
`coevolve run --resume`, ends exactly where an uninterrupted run ends: the same weights, the
same pool (task by task, ids included), rounds, signals, trajectories, evaluation rows and
metrics. Issue 16 found runs that ended elsewhere after a kill between a round's admission and
the next checkpoint; this test kills there in both evolution modes.

`bench/kill_resume.py` runs the same comparison with 50 random and aimed kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, coevolve_cmd

pytest.importorskip("torch")
pytest.importorskip("safetensors")

CONFIG = REPO / "examples" / "kvstore-tiny.yaml"
# a few steps, evolution and checkpoints every 2 steps, an evaluation every 2 steps; rounds
# explore from random pool tasks (guidance: random), so that every round admits tasks whatever
# the tiny model's signals happen to be, and the admission kill points are always reached
SETTINGS = {
    "training.steps": 6, "training.tasks_per_step": 2, "training.checkpoint_every": 2, "training.keep_checkpoints": 3,
    "rollout.group_size": 2, "rollout.max_new_tokens": 24, "algorithm.options.warm_start.steps": 3,
    "pool.seed_tasks": 8, "eval.max_tasks": 2, "eval.every": 2,
    "evolution.every": 2, "evolution.guidance": "random", "evolution.random_starts": 2,
}

# aimed kills, in the order a run meets the points (a resumed process counts visits from 1, and
# each kill sends the next attempt back to the last checkpoint); "random" is a SIGKILL after a
# random share (20-60%) of the uninterrupted run's time. 15 kills in all.
KILLS = {
    "sync": ["seed_pool:1", "warm_start:1", "eval_before:1", "checkpoint_renamed:1", "round_started:1", "after_admission:1",
             "eval_during:1", "checkpoint_commit:1", "eval_after:1"],
    # the random kill comes first: a fresh run cannot finish within 60% of a run's time, and every aimed
    # point after it is reachable from wherever it struck
    "async": ["random", "round_started:1", "after_admission:1", "checkpoint_saved:1", "step_recorded:1", "eval_after:1"],
}


def _sets(settings: dict[str, Any]) -> list[str]:
    return [arg for k, v in settings.items() for arg in ("--set", f"{k}={json.dumps(v) if isinstance(v, str) else v}")]


def _run(args: list[str], env: dict[str, str], kill_at: str | None, rng: random.Random, span: float = 10.0) -> int:
    """Run `coevolve`; ``kill_at`` "random" sends SIGKILL after a random share (20-60%) of ``span``,
    the seconds the uninterrupted run took, so the kill lands inside the run however fast the
    machine is (a fixed 3-8 s once came after a whole run on a quiet machine)."""
    # one torch thread per process: several times faster on a shared 2-core machine, and every
    # attempt computes with the same thread count as the uninterrupted run it is compared with
    env = {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("COEVOLVE_TEST_KILL_AT", None)
    if kill_at and kill_at != "random":
        env["COEVOLVE_TEST_KILL_AT"] = kill_at
    proc = subprocess.Popen([*coevolve_cmd(), *args, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if kill_at == "random":
        try:
            proc.wait(timeout=rng.uniform(0.2, 0.6) * span)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=900)
    assert proc.returncode in (0, -signal.SIGKILL), f"{args} ({kill_at}) failed:\n{err[-4000:]}"
    return proc.returncode


def _rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _without(data: str | bytes, *keys: str) -> Any:
    d = json.loads(zlib.decompress(data) if isinstance(data, bytes) else data)  # trajectories are compressed by default
    for k in keys:
        d.pop(k, None)
    if isinstance(d.get("info"), dict):
        d["info"].pop("rollout_seconds", None)
    return d


def final_state(run: Path) -> dict[str, Any]:
    """What must not differ between an interrupted and an uninterrupted run (wall times aside)."""
    import safetensors.torch as st

    db = run / "run.sqlite"
    weights = st.load_file(str(run / "checkpoints" / "step-000006" / "policy" / "model.safetensors"))
    timing = ("seconds",)
    return {
        "weights": {k: v.numpy().tobytes() for k, v in sorted(weights.items())},
        "tasks": [(i, o, s, f, a, _without(d)) for i, o, s, f, a, d in _rows(db, "SELECT id, origin, split, fingerprint, step_admitted, data FROM tasks ORDER BY seq")],
        "rounds": [(r, s, _without(d, *timing)) for r, s, d in _rows(db, "SELECT round, step, data FROM rounds ORDER BY round")],
        "signals": _rows(db, "SELECT id, step, round, kind, task_id, trajectory_id, data FROM signals ORDER BY step, id"),
        "evals": [(s, p, sp, _without(d, *timing)) for s, p, sp, d in _rows(db, "SELECT step, phase, split, data FROM evals ORDER BY phase, step")],
        "trajectories": [(i, s, t, sc, ok, p, _without(d)) for i, s, t, sc, ok, p, d in
                         _rows(db, "SELECT id, step, task_id, score, success, phase, data FROM trajectories ORDER BY id")],
        "metrics": [r for r in _rows(db, "SELECT step, key, value FROM metrics ORDER BY step, key")
                    if not r[1].startswith("time/") and "seconds" not in r[1] and "per_s" not in r[1]],
        "status": _rows(db, "SELECT value FROM meta WHERE key = 'status'"),
    }


def _compare(whole: dict[str, Any], killed: dict[str, Any]) -> None:
    for key in whole:
        assert killed[key] == whole[key], f"{key} differ after the kills"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_killed_again_and_again_ends_like_an_uninterrupted_run(tmp_path: Path, sub_env: dict[str, str], mode: str) -> None:
    settings = {**SETTINGS, "evolution.mode": mode}
    rng = random.Random(int(os.environ.get("COEVOLVE_TORTURE_SEED", "16")) + (mode == "async"))
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    t0 = time.monotonic()
    assert _run(["run", str(CONFIG), "--set", f"run_dir={whole}", *_sets(settings)], sub_env, None, rng) == 0
    span = time.monotonic() - t0

    kills = []
    for spec in KILLS[mode]:
        # until the run has written its folder (a random kill may strike before), it starts afresh
        fresh = not (killed / "config.yaml").exists()
        args = ["run", str(CONFIG), "--set", f"run_dir={killed}", *_sets(settings)] if fresh else ["run", "--resume", str(killed)]
        code = _run(args, sub_env, spec, rng, span)
        if code == 0:
            break  # a random kill came too late: the run finished
        kills.append(spec)
    else:
        assert _run(["run", "--resume", str(killed)], sub_env, None, rng) == 0
    aimed = [k for k in kills if k != "random"]
    assert aimed == [k for k in KILLS[mode] if k != "random"], f"some kill points were never reached: {kills}"

    _compare(final_state(whole), final_state(killed))
    assert final_state(whole)["rounds"], "no round ran: the comparison of rounds proves nothing"
    assert not list((killed / "checkpoints").glob("*.tmp"))
    # the replayed rounds reused what the killed attempts had paid for, or were run again: both
    # leave no attempt marked as rolled back without a live round of the same number beside it
    live = {r for (r,) in _rows(killed / "run.sqlite", "SELECT round FROM rounds")}
    assert {r for (r,) in _rows(killed / "run.sqlite", "SELECT round FROM rolled_back_rounds")} <= live
