"""evolution.judge_rollouts: confirm — the teacher's judge as a second opinion on training
rollouts of synthetic tasks (their grader is derived from their own reference actions)."""

from __future__ import annotations

import json
from pathlib import Path

from coevolve_sdk.config import RunConfig
from coevolve_sdk.evolution.judge import judge_step
from coevolve_sdk.run.loop import CoEvolveLoop
from coevolve_sdk.records import RolloutGroup, Step, Task, Trajectory
from tests.core.test_loop_cli import TOY


def test_a_success_the_judge_rejects_becomes_a_failure(scripted, tmp_path: Path) -> None:
    answers = iter(["Success: false\nReason: the query asked for limes.", "Success: true\nReason: ok."])
    s = scripted(lambda stage, messages: next(answers))
    cfg = json.loads(json.dumps(TOY))
    cfg.update(run_dir=str(tmp_path / "run"), teacher={"name": "litellm", "options": {"model": "scripted/judge", "use_judge": True}})
    cfg["evolution"] = {"every": 2, "judge_rollouts": "confirm"}
    loop = CoEvolveLoop(RunConfig.model_validate(cfg))
    task = Task(env="kvstore", query="Set figs to 3.", origin="synthetic", reference_actions=["a", "b", "c"])
    seed = Task(env="kvstore", query="Set figs to 4.", origin="seed")
    trajs = [Trajectory(task_id=task.id, steps=[Step(action="a", observation="ok")], score=1.0, success=True) for _ in range(2)]
    failed = Trajectory(task_id=task.id, score=0.0, success=False)
    seed_traj = Trajectory(task_id=seed.id, score=1.0, success=True)
    groups = [RolloutGroup(task=task, step=1, trajectories=[*trajs, failed]), RolloutGroup(task=seed, step=1, trajectories=[seed_traj])]
    stats = judge_step(loop.teacher, loop.algorithm, groups, groups, loop.store, loop.step)  # what the loop calls when judge_rollouts is 'confirm'
    assert stats["judge/calls"] == 2 and stats["judge/rejected"] == 1
    assert s.stages() == ["judge", "judge"]  # only successes on synthetic tasks are judged
    assert [(t.score, t.success, t.info.get("judge")) for t in groups[0].trajectories] == [(0.0, False, False), (1.0, True, True), (0.0, False, None)]
    assert seed_traj.success and "judge" not in seed_traj.info
