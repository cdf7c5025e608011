"""The AppWorld environment for real: AppWorld 0.1.3.post1 in its own virtualenv, worker
processes over loopback HTTP, and the synthetic task set built at test time (no network)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import gymnasium
import pytest

from coevolve_appworld.code import fence

# One worker runs these (make test runs pytest-xdist): they share AppWorld's runtime, which the
# first session builds for about a minute, and a second worker would only wait for its lock.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("appworld-runtime")]

PLAYLIST_TASK = "appworld-c0e0a01_1"
LOGIN = (
    'pw = {a["account_name"]: a["password"] for a in apis.supervisor.show_account_passwords()}\n'
    'me = apis.supervisor.show_profile()\n'
)


def task_by_id(env, task_id, split="train"):
    return next(t for t in env.tasks(split) if t.id == task_id)


def run(env, task, actions):
    env.reset(options={"task": task})
    out = []
    for a in actions:
        if env.done:
            break
        out.append(env.step(a))
    return out, env.score()


def test_splits_and_prompt(make_env):
    env = make_env()
    assert [t.payload["task_id"] for t in env.tasks("train")] == ["c0e0a01_1", "c0e0a01_2", "c0e0a01_3"]
    assert len(env.tasks("dev")) == 1
    with pytest.raises(ValueError, match="test_normal"):
        env.tasks("test_normal")
    obs, info = env.reset(options={"task": task_by_id(env, PLAYLIST_TASK)})
    assert "Evening Walk" in obs and "Noor Haddad" in obs and "create_playlist" in obs
    assert info["tools"][0]["function"]["name"] == "execute_python"


def test_correct_solution_scores_one_and_wrong_scores_zero(make_env):
    env = make_env()
    for task in env.tasks("train") + env.tasks("dev"):
        steps, score = run(env, task, task.reference_actions)
        assert score == 1.0, (task.id, env.last_grade)
        assert steps[-1][2] is True  # terminated by complete_task
        assert steps[-1][1] == 1.0
    task = task_by_id(env, PLAYLIST_TASK)
    steps, score = run(env, task, [fence("apis.supervisor.complete_task(answer=7)")])
    assert score == 0.0 and steps[-1][2] is True
    assert env.last_grade.failures
    # an agent that does the work but answers wrong fails too
    wrong = LOGIN + ('tok = apis.spotify.login(username=me["email"], password=pw["spotify"])["access_token"]\n'
                     'apis.spotify.create_playlist(title="Evening Walk", is_public=False, access_token=tok)\n'
                     "apis.supervisor.complete_task(answer=1)")
    assert run(env, task, [fence(wrong)])[1] == 0.0


def test_multi_step_episode_and_step_limit(make_env):
    env = make_env(max_steps=3)
    task = task_by_id(env, PLAYLIST_TASK)
    env.reset(options={"task": task})
    obs, r, term, trunc, info = env.step(fence("print(apis.supervisor.show_profile()['first_name'])"))
    assert "Noor" in obs and not term and r == 0.0 and info["tool_names"] == ["supervisor.show_profile"]
    obs, r, term, trunc, info = env.step("no code here")
    assert "No code found" in obs and info["error"]
    obs, r, term, trunc, info = env.step(fence("x = 1/0"))
    assert obs.startswith("Execution failed") and trunc and not term and r == 0.0


def test_action_pattern_names_the_called_apis(make_env):
    env = make_env()
    task = task_by_id(env, PLAYLIST_TASK)
    from coevolve_sdk.records import Trajectory

    run(env, task, task.reference_actions)
    pattern = env.action_pattern(Trajectory(task_id=task.id, steps=env.steps))
    assert pattern == ">".join(["supervisor.show_account_passwords", "supervisor.show_profile", "spotify.login",
                                "spotify.create_playlist", "spotify.show_playlist_library", "supervisor.complete_task"])


def test_sandbox_refuses_files_and_sockets(make_env):
    env = make_env()
    env.reset(options={"task": task_by_id(env, PLAYLIST_TASK)})
    for code in ["print(open('/etc/hostname').read())", "import os\nprint(os.listdir('/'))",
                 "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 9))",
                 "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')"]:
        obs, _, _, _, info = env.step(fence(code))
        assert obs.startswith("Execution failed") and "not allowed" in obs, obs
        assert info["error"]
    obs, *_ = env.step(fence("print(apis.supervisor.show_profile()['last_name'])"))
    assert "Haddad" in obs  # the world is still usable


def test_infinite_loop_is_stopped_by_the_time_limit(make_env):
    env = make_env(execution_timeout=2)
    env.reset(options={"task": task_by_id(env, PLAYLIST_TASK)})
    obs, _, term, _, info = env.step(fence("while True:\n    pass"))
    assert "timed out after 2 seconds" in obs and not term and info["error"]
    obs, *_ = env.step(fence("print(6 * 7)"))
    assert obs.strip() == "42"


def test_memory_limit_fails_the_execution_not_the_worker(make_env):
    env = make_env()
    env.reset(options={"task": task_by_id(env, PLAYLIST_TASK)})
    pid = env.worker.pid
    obs, *_ = env.step(fence("blob = bytearray(16 * 1024 ** 3)"))
    assert "MemoryError" in obs
    obs, *_ = env.step(fence("print('still here')"))
    assert "still here" in obs and env.worker.pid == pid


def test_a_hang_that_escapes_the_alarm_costs_one_episode(make_env):
    env = make_env(execution_timeout=1, request_grace=3)
    task = task_by_id(env, PLAYLIST_TASK)
    env.reset(options={"task": task})
    old = env.worker.pid
    swallow = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    obs, r, term, _, info = env.step(fence(swallow))
    assert term and r == 0.0 and info.get("worker_failure") and "did not answer" in obs
    _, score = run(env, task, task.reference_actions)
    assert score == 1.0 and env.worker.pid != old


def test_killed_worker_is_replaced_and_the_next_episode_runs(make_env):
    env = make_env()
    task = task_by_id(env, PLAYLIST_TASK)
    env.reset(options={"task": task})
    victim = env.worker.pid
    outputs = Path(env.worker.runtime.root) / "experiments" / "outputs"
    assert list(outputs.glob(f"coevolve-*-w{victim}")), "the open world writes its outputs under the worker's pid"
    os.kill(victim, signal.SIGKILL)
    env.worker.proc.wait(timeout=10)
    obs, r, term, _, info = env.step(fence("print(1)"))
    assert term and r == 0.0 and info.get("worker_failure")
    assert env.score() == 0.0
    _, score = run(env, task, task.reference_actions)
    assert score == 1.0 and env.worker.pid != victim
    # the replacement swept the killed worker's outputs; the disk does not fill over a long run
    assert not list(outputs.glob(f"coevolve-*-w{victim}"))
    # killed between episodes: reset notices and replaces it
    os.kill(env.worker.pid, signal.SIGKILL)
    env.worker.proc.wait(timeout=10)
    _, score = run(env, task, task.reference_actions)
    assert score == 1.0


def _raw_request(url: str, path: str, body: dict, headers: dict) -> tuple[int, dict]:
    """A request to a worker from outside its pool (another local process would do this)."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers})
    try:
        with opener.open(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_worker_refuses_requests_without_the_pool_token(make_env):
    from coevolve_appworld.pool import TOKEN_HEADER

    env = make_env()
    env.reset(options={"task": task_by_id(env, PLAYLIST_TASK)})
    worker = env.worker
    plant = {"code": "coevolve_marker = 'planted'\nprint('ran')"}
    for headers in ({}, {TOKEN_HEADER: ""}, {TOKEN_HEADER: "x" * 43}, {TOKEN_HEADER: worker._token[:-1]}):
        for path in ("/execute", "/health", "/close"):
            status, payload = _raw_request(worker.url, path, plant, headers)
            assert status == 403 and payload["ok"] is False and TOKEN_HEADER in payload["error"], (path, headers, payload)
    # nothing of the refused requests ran, and the pool's own requests still work on the same world
    obs, *_ = env.step(fence("print(coevolve_marker)"))
    assert "NameError" in obs
    obs, *_ = env.step(fence("print(apis.supervisor.show_profile()['first_name'])"))
    assert obs.strip() == "Noor" and env.worker.pid == worker.pid
    status, payload = _raw_request(worker.url, "/health", {}, {TOKEN_HEADER: worker._token})
    assert status == 200 and payload["result"]["pid"] == worker.pid
    # the secret is not on the worker's command line (every local user can read that in ps)
    assert worker._token.encode() not in Path(f"/proc/{worker.pid}/cmdline").read_bytes()


def test_worker_will_not_serve_without_a_token(appworld_home):
    import subprocess

    from coevolve_appworld.runtime import isolated_script, load_runtime

    rt = load_runtime(appworld_home)
    env = {k: v for k, v in rt.subprocess_env().items() if k != "COEVOLVE_WORKER_TOKEN"}
    proc = subprocess.run([rt.python, str(isolated_script("worker.py")), "--root", rt.root], env=env, input=b"",
                          capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"COEVOLVE_WORKER_TOKEN" in proc.stderr
    assert b"COEVOLVE_WORKER_READY" not in proc.stdout


def test_two_groups_in_parallel_do_not_interfere(make_env):
    from coevolve_sdk.training.rollout import EnvPool

    envs = EnvPool(lambda: make_env())
    task = task_by_id(make_env(), PLAYLIST_TASK)
    results: dict[str, list] = {}
    errors: list[BaseException] = []

    def group(label: str) -> None:
        try:
            members = [envs.acquire() for _ in range(2)]
            for i, env in enumerate(members):
                env.reset(options={"task": task})
            for i, env in enumerate(members):
                code = LOGIN + ('tok = apis.spotify.login(username=me["email"], password=pw["spotify"])["access_token"]\n'
                                f'apis.spotify.create_playlist(title="{label}-{i}", access_token=tok)\n'
                                'print(sorted(p["title"] for p in apis.spotify.show_playlist_library(access_token=tok)))')
                obs, *_ = env.step(fence(code))
                results.setdefault(label, []).append((env.worker.pid, obs.strip()))
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=group, args=(g,)) for g in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    pids = [pid for rows in results.values() for pid, _ in rows]
    assert len(set(pids)) == 4
    for label, rows in results.items():
        for i, (_, obs) in enumerate(rows):
            assert json.loads(obs) == sorted(["Road Trip", f"{label}-{i}"]), obs


def test_random_explorer_task_validates_by_replay_and_is_graded_by_state(make_env):
    from coevolve_sdk.evolution.teacher import RandomExplorer
    from coevolve_sdk.records import ExplorationContext
    from coevolve_sdk.evolution.validation import Validator

    env = make_env()
    base = task_by_id(env, "appworld-c0e0a01_2")
    teacher = RandomExplorer(RandomExplorer.Options(rounds=2, steps_per_round=5, max_candidates=2))
    validator = Validator()
    ctx = ExplorationContext(signal_kind="seed", summary="unguided")
    accepted, verdicts = [], []
    for seed in range(6):
        cands = teacher.abstract(env, base, teacher.explore(env, base, ctx, seed=seed), ctx, set())
        for c in cands:
            verdict, task = validator.validate(env, c, base, set())
            verdicts.append(verdict)
            if verdict.accepted:
                accepted.append(task)
        if accepted:
            break
    assert accepted, [v.reason for v in verdicts]
    task = accepted[0]
    assert task.origin == "synthetic" and task.payload["reference_outcome"]["changes"]
    assert task.query.startswith("Please ")
    # graded by state: the reference code scores 1 in a fresh world, doing nothing scores 0,
    # and doing only part of it scores 0
    assert env.replay(task, task.reference_actions).score == 1.0
    assert run(env, task, [fence("apis.supervisor.complete_task()")])[1] == 0.0
    writes = [a for a in task.reference_actions if any(w in a for w in ("create_", "update_", "delete_", "add_"))]
    if len(writes) >= 1:
        partial = [a for a in task.reference_actions if a != writes[-1]]
        assert run(env, task, partial)[1] == 0.0


def test_a_reference_that_changes_nothing_is_rejected(make_env):
    from coevolve_sdk.records import CandidateTask
    from coevolve_sdk.evolution.validation import Validator

    env = make_env()
    base = task_by_id(env, "appworld-c0e0a01_2")
    read = fence("print(apis.supervisor.show_profile())")
    cand = CandidateTask(query="Show my profile three times.", reference_actions=[read, read, read])
    verdict, task = Validator().validate(env, cand, base, set())
    assert not verdict.accepted and "nothing to grade" in verdict.reason and task is None
    broken = CandidateTask(query="x", reference_actions=[read, fence("apis.simple_note.show_note(note_id=999)"), read])
    verdict, _ = Validator().validate(env, broken, base, set())
    assert not verdict.accepted and "failed" in verdict.reason


def test_gymnasium_make_and_cli(appworld_home):
    import typer
    from typer.testing import CliRunner

    import coevolve_sdk  # noqa: F401  (registers coevolve/* ids)
    from coevolve_appworld import plugin

    env = gymnasium.make("coevolve/appworld-v0", home=str(appworld_home))
    try:
        obs, info = env.reset(seed=3)
        assert "Task:" in obs and info["task_id"].startswith("appworld-")
    finally:
        env.close()
    cli = typer.Typer()

    @cli.callback()
    def main() -> None:
        """coevolve"""

    plugin.register_commands(cli)
    res = CliRunner().invoke(cli, ["appworld", "setup", "--home", str(appworld_home), "--synthetic"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["appworld", "status", "--home", str(appworld_home)])
    assert res.exit_code == 0 and "train: 3 tasks" in res.output, res.output
    res = CliRunner().invoke(cli, ["appworld", "status", "--home", str(appworld_home / "nowhere")])
    assert res.exit_code == 1 and "coevolve appworld setup" in res.output


def test_sdk_process_never_imports_appworld(appworld_home):
    assert "appworld" not in sys.modules


def test_rollout_steps_episodes_concurrently_with_the_same_result(make_env):
    # the core rollout with a policy that replays each task's reference one statement per turn:
    # stepped from three threads, the episodes' worlds run side by side and every trajectory is
    # the one sequential stepping gives
    from coevolve_appworld.testing import ScriptPolicy
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups

    tasks = make_env().tasks("train")
    policy = ScriptPolicy(tasks)
    envs = EnvPool(lambda: make_env())
    runs = {}
    for workers in (1, 3):
        groups = collect_groups(policy, envs, tasks, RolloutConfig(group_size=1, env_workers=workers), step=0)
        assert groups[0].trajectories[0].info["env_threads"] == workers
        runs[workers] = [(t.task_id, t.messages[2:], t.score, t.action_pattern) for g in groups for t in g.trajectories]
    assert runs[1] == runs[3]
    assert [score for _, _, score, _ in runs[3]] == [1.0, 1.0, 1.0]
    assert all(len(messages) >= 8 for _, messages, _, _ in runs[3])  # several turns each
