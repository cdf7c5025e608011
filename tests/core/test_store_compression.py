"""store.compress_trajectories: trajectories kept as zlib-compressed JSON read back unchanged,
rows of both kinds side by side, and the setting switched on when a run resumes."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Step, Trajectory
from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import write_config


def _chatty(i: int, turns: int = 12) -> Trajectory:
    msgs = [{"role": "system", "content": "You manage a key-value store. Tools: get, set, delete, list."},
            {"role": "user", "content": f"Copy the value of key-{i} into backup-{i} and delete key-{i}."}]
    steps = []
    for n in range(turns):
        action = f'I will read the value first.\n<tool_call>{{"name": "get", "arguments": {{"key": "key-{i}-{n}"}}}}</tool_call>'
        obs = f'{{"key": "key-{i}-{n}", "value": "value number {n * 7 + i} of the store"}}'
        msgs += [{"role": "assistant", "content": action}, {"role": "tool", "content": obs}]
        steps.append(Step(action=action, observation=obs, info={"tool_names": ["get"]}))
    return Trajectory(task_id=f"task-{i}", env="kvstore", step=1, messages=msgs, steps=steps, score=0.5, success=True,
                      action_pattern=">".join(["get"] * turns), token_ids=list(range(50)), loss_mask=[1] * 50, logprobs=[-0.1] * 50)


def _raw(db: Path) -> dict[str, object]:
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT id, data FROM trajectories"))
    finally:
        con.close()


def test_compressed_trajectories_read_back_unchanged_beside_plain_ones(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    plain = [_chatty(i) for i in range(4)]
    packed = [_chatty(i) for i in range(4, 8)]
    evals = [_chatty(i) for i in range(8, 10)]
    store = RunStore(db)
    store.record_step(1, plain, [], {"rollout/reward_mean": 0.5})
    store.close()
    store = RunStore(db, compress=True)  # switched on for a run that already holds plain rows
    store.record_step(2, packed, [], {"rollout/reward_mean": 0.5})
    store.record_eval(2, "after", "test", {"tasks": 2, "success_rate": 1.0, "mean_score": 0.5}, evals)
    store.close()

    raw = _raw(db)
    assert all(isinstance(raw[t.id], str) for t in plain)
    assert all(isinstance(raw[t.id], bytes) for t in packed + evals)
    assert sum(len(raw[t.id]) for t in packed) * 3 < sum(len(raw[t.id]) for t in plain)  # the same shape, far fewer bytes
    reader = RunStore(db, read_only=True)
    for t in plain + packed + evals:
        assert reader.get_trajectory(t.id) == t.without_tokens()
    reader.close()


@pytest.mark.slow
def test_a_run_resumes_with_compression_switched_on(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": 2, "training.checkpoint_every": 2, "eval": {"max_tasks": 2},
                                    "store": {"compress_trajectories": False}})  # plain rows first (on by default since issue 23)
    first = subprocess.run([*coevolve_cmd(), "run", str(cfg), "-q"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert first.returncode == 0, first.stderr + first.stdout
    run = tmp_path / "run"
    more = subprocess.run([*coevolve_cmd(), "run", "--resume", str(run), "-q", "--set", "training.steps=4",
                           "--set", "store.compress_trajectories=true"], capture_output=True, text=True, env=sub_env, timeout=300)
    assert more.returncode == 0, more.stderr + more.stdout
    con = sqlite3.connect(run / "run.sqlite")
    kinds = dict(con.execute("SELECT step, GROUP_CONCAT(DISTINCT typeof(data)) FROM trajectories WHERE phase = 'train' GROUP BY step"))
    con.close()
    assert kinds == {1: "text", 2: "text", 3: "blob", 4: "blob"}
    store = RunStore(run / "run.sqlite", read_only=True)
    ids = [r[0] for r in store._query("SELECT id FROM trajectories")]
    assert ids and all(store.get_trajectory(i) is not None for i in ids)
    store.close()
