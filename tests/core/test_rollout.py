"""The rollout loop: masks and logprobs line up with the tokens; concurrent environment steps
change nothing but the wall time."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from coevolve_kvstore import KVStoreEnv
from coevolve_sdk.components.context import RunContext
from coevolve_sdk.env.base import AgentEnv, Outcome
from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
from coevolve_sdk.records import Task, ToolSpec
from tests.core.toy_plugin import OBS_TOKEN, MenuOptions, MenuPolicy


def test_groups_masks_and_logprobs(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: KVStoreEnv(max_steps=3))
    pol = MenuPolicy(MenuOptions(seed=0), ctx)
    tasks = KVStoreEnv().tasks()[:3]
    groups = collect_groups(pol, EnvPool(ctx.make_env), tasks, RolloutConfig(group_size=5), step=1)
    assert [g.task.id for g in groups] == [t.id for t in tasks]
    for g in groups:
        assert len(g.trajectories) == 5
        for tr in g.trajectories:
            ids, mask, lps = tr.token_ids, tr.loss_mask, tr.logprobs
            assert len(ids) == len(mask) == len(lps)
            assert mask[: tr.prompt_length] == [0] * tr.prompt_length
            # each agent turn is [action, eos] with mask 1; observations are OBS_TOKEN with mask 0
            for tok, m, lp in zip(ids, mask, lps):
                if tok == OBS_TOKEN:
                    assert m == 0 and lp == 0.0
                if m == 1 and tok != pol.eos_token_id:
                    assert lp < 0.0
            assert sum(mask) == 2 * tr.info["turns"]
            assert len(tr.steps) == tr.info["turns"]
            assert tr.action_pattern == ">".join(n for s in tr.steps for n in s.info.get("tool_names", []))


def test_greedy_rollouts_are_deterministic(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: KVStoreEnv(max_steps=3))
    pol = MenuPolicy(MenuOptions(seed=0), ctx)
    tasks = KVStoreEnv().tasks("test")
    settings = RolloutConfig(group_size=1, temperature=0.0)
    a = collect_groups(pol, EnvPool(ctx.make_env), tasks, settings, step=0, greedy=True)
    b = collect_groups(pol, EnvPool(ctx.make_env), tasks, settings, step=0, greedy=True)
    assert [t.actions for g in a for t in g.trajectories] == [t.actions for g in b for t in g.trajectories]


# ---------------------------------------------------------------- concurrent environment steps
class _Probe:
    """Counts the environment calls running at the same moment (across instances)."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.barrier = barrier

    def __enter__(self) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.active -= 1


class DiceEnv(AgentEnv):
    """Each answer draws from the episode's own generator and takes a random few milliseconds,
    so that threads finish out of order; the episode ends on a low draw."""

    name = "test-dice"
    concurrent_steps = True
    probe = _Probe()

    def tasks(self, split: str = "train") -> list[Task]:
        return [Task(id=f"dice-{i}", env=self.name, query=f"roll {i}", reference_actions=["roll", "hold", "pass"]) for i in range(3)]

    def tools(self) -> list[ToolSpec]:
        return []

    def begin(self, task: Task) -> list[dict[str, Any]]:
        with self.probe:
            return [{"role": "system", "content": "play"}, {"role": "user", "content": task.query}]

    def act(self, action: str) -> Outcome:
        with self.probe:
            if self.probe.barrier is not None:
                self.probe.barrier.wait()
            time.sleep(float(self.np_random.uniform(0.0, 0.004)))
            n = int(self.np_random.integers(0, 1000))
        return Outcome(messages=[{"role": "user", "content": f"{action}: {n}"}], done=n < 150, tool_names=[action])

    def score(self) -> float:
        with self.probe:
            return float(sum(len(s.observation) for s in self.steps) % 3 == 0)

    def sample_action(self) -> str:
        return "roll"


class SerialDiceEnv(DiceEnv):
    name = "test-dice-serial"
    concurrent_steps = False


def _dice_run(tmp_path: Path, env_cls: type[DiceEnv], workers: int, group_size: int = 6, max_steps: int = 5, tasks: int = 3):
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: env_cls(max_steps=max_steps))
    pol = MenuPolicy(MenuOptions(seed=3), ctx)
    settings = RolloutConfig(group_size=group_size, env_workers=workers)
    return collect_groups(pol, EnvPool(ctx.make_env), env_cls().tasks()[:tasks], settings, step=2, seed=11)


def _fingerprint(groups) -> list:
    return [(t.task_id, t.messages, t.token_ids, t.loss_mask, t.logprobs, t.score, t.truncated, t.action_pattern)
            for g in groups for t in g.trajectories]


def test_concurrent_env_steps_give_the_same_trajectories(tmp_path: Path) -> None:
    DiceEnv.probe = _Probe()
    serial = _dice_run(tmp_path, DiceEnv, workers=1)
    assert DiceEnv.probe.peak == 1
    parallel = _dice_run(tmp_path, DiceEnv, workers=4)
    assert 1 < DiceEnv.probe.peak <= 4
    assert parallel[0].trajectories[0].info["env_threads"] == 4
    assert _fingerprint(parallel) == _fingerprint(serial)
    # the run is not trivially short: episodes of different lengths, several turns each
    assert len({t.info["turns"] for g in serial for t in g.trajectories}) > 1


def test_concurrent_env_steps_overlap(tmp_path: Path) -> None:
    # four one-step episodes whose steps each wait for the other three: stepped one at a time,
    # the barrier would break and every step would report an error
    DiceEnv.probe = _Probe(threading.Barrier(4, timeout=60))
    groups = _dice_run(tmp_path, DiceEnv, workers=4, group_size=4, max_steps=1, tasks=1)
    steps = [s for g in groups for t in g.trajectories for s in t.steps]
    assert len(steps) == 4 and not [s.info["error"] for s in steps if "error" in s.info]


def test_env_without_concurrent_steps_is_stepped_one_at_a_time(tmp_path: Path) -> None:
    SerialDiceEnv.probe = _Probe()
    with pytest.warns(RuntimeWarning, match="concurrent_steps"):
        groups = _dice_run(tmp_path, SerialDiceEnv, workers=4)
    assert SerialDiceEnv.probe.peak == 1
    assert groups[0].trajectories[0].info["env_threads"] == 1


class BrokenDiceEnv(DiceEnv):
    name = "test-dice-broken"

    def begin(self, task: Task) -> list[dict[str, Any]]:
        if task.id == "dice-1":
            raise RuntimeError("cannot open this world")
        return super().begin(task)


def test_environments_go_back_to_the_pool_when_a_reset_fails(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path, make_env=lambda: BrokenDiceEnv(max_steps=2))
    pol = MenuPolicy(MenuOptions(seed=0), ctx)
    pool = EnvPool(ctx.make_env)
    with pytest.raises(RuntimeError, match="cannot open"):
        collect_groups(pol, pool, BrokenDiceEnv().tasks(), RolloutConfig(group_size=2, env_workers=3), step=0)
    assert len(pool._free) == 6
