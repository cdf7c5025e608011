"""A policy and an algorithm small enough to test the core loop without torch.

``MenuPolicy`` chooses each turn's message from a fixed menu (the distinct reference actions of
the environment's train tasks), with a table of logits per (prompt, turn). ``Reinforce`` updates
that table with group-relative REINFORCE. Both are honest implementations of the core
interfaces (token ids, logprobs, loss mask, save/load), just not language models; the real
policy and GRPO live in the coevolve-grpo plugin.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from coevolve_sdk.training.algorithm import Algorithm, CheckpointError, find_policy_dir, policy_dir
from coevolve_sdk.components.context import RunContext
from coevolve_sdk.components.hooks import hookimpl
from coevolve_sdk.training.policy import Generation, Policy
from coevolve_sdk.records import RolloutGroup

PROMPT_BASE = 100_000
OBS_TOKEN = 99_999


class MenuOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = 0


class MenuPolicy(Policy):
    name = "toy-menu"
    Options = MenuOptions

    def __init__(self, options: MenuOptions, context: RunContext) -> None:
        env = context.new_env()
        menu: list[str] = []
        for t in env.tasks("train"):
            for a in t.reference_actions:
                if a not in menu:
                    menu.append(a)
        self.menu = menu
        self.eos_token_id = len(menu)
        self.table: dict[str, list[float]] = {}
        self.rng = np.random.default_rng(options.seed)

    def _key(self, ids: list[int]) -> str:
        turn = sum(1 for i in ids if i == self.eos_token_id)
        return f"{ids[0]}:{turn}"

    def logits(self, key: str) -> np.ndarray:
        row = self.table.get(key)
        return np.zeros(len(self.menu)) if row is None else np.asarray(row)

    def encode_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        user = next(m["content"] for m in messages if m["role"] == "user")
        h = int(hashlib.sha256(user.encode()).hexdigest()[:6], 16)
        return [PROMPT_BASE + h]

    def encode_followup(self, messages: list[dict[str, Any]]) -> list[int]:
        return [OBS_TOKEN]

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0, greedy: bool = False) -> list[Generation]:
        out = []
        for ids in prompts:
            z = self.logits(self._key(ids))
            p = np.exp(z - z.max())
            p /= p.sum()
            a = int(np.argmax(z)) if greedy else int(self.rng.choice(len(p), p=p))
            out.append(Generation(token_ids=[a, self.eos_token_id], logprobs=[float(np.log(p[a])), 0.0], text=self.menu[a], finished=True))
        return out

    def decode(self, token_ids: list[int]) -> str:
        return "".join(self.menu[i] for i in token_ids if 0 <= i < len(self.menu))

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "menu_policy.json").write_text(json.dumps({"table": self.table, "rng": self.rng.bit_generator.state}))

    def load(self, path: Path) -> None:
        try:
            d = json.loads((path / "menu_policy.json").read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{path / 'menu_policy.json'} cannot be read: {e}") from None
        self.table = d["table"]
        self.rng.bit_generator.state = d["rng"]


class ReinforceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lr: float = Field(1.0, gt=0)
    # the two test switches may change on resume: they do not change what a step computes
    step_delay: float = Field(0.0, ge=0, description="Sleep per step, so tests can kill a run mid-way.",
                              json_schema_extra={"may_change_on_resume": True})
    hold_until: str = Field("", description="From the second update on, wait until this file exists (at most 300 s), so "
                            "that a test can act on a run that is certainly still running; '': never wait.",
                            json_schema_extra={"may_change_on_resume": True})
    ctrl_c_in_finaliser_at: int = Field(0, ge=0, description="At this update, press Ctrl-C while a finaliser runs "
                                        "(where Python swallows the KeyboardInterrupt); 0: never.",
                                        json_schema_extra={"may_change_on_resume": True})


class _PressesCtrlCWhenCollected:
    """Sends SIGINT to its own process from ``__del__`` and waits for the handler to run there,
    which is where CPython prints "Exception ignored" and drops the KeyboardInterrupt."""

    def __del__(self) -> None:
        import os
        import signal
        import time

        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            time.sleep(0.001)


class Reinforce(Algorithm):
    name = "toy-reinforce"
    Options = ReinforceOptions

    def __init__(self, options: ReinforceOptions, context: RunContext) -> None:
        super().__init__(options, context)
        assert isinstance(context.policy, MenuPolicy)
        self.policy: MenuPolicy = context.policy
        self.updates = 0

    def step(self, groups: list[RolloutGroup]) -> dict[str, float]:
        import time

        time.sleep(self.options.step_delay)
        held = time.time()
        while self.options.hold_until and self.updates >= 1 and not Path(self.options.hold_until).exists() and time.time() - held < 300:
            time.sleep(0.05)
        if self.updates + 1 == self.options.ctrl_c_in_finaliser_at:
            obj = _PressesCtrlCWhenCollected()
            del obj  # the interrupt is raised inside __del__ and swallowed there
        pol, flat = self.policy, 0
        for g in groups:
            scores = np.array(g.scores)
            if scores.std() == 0:
                flat += 1
                continue
            adv = scores - scores.mean()
            for tr, a in zip(g.trajectories, adv):
                ids, mask = tr.token_ids or [], tr.loss_mask or []
                for i, (tok, m) in enumerate(zip(ids, mask)):
                    if m and tok != pol.eos_token_id:
                        key = pol._key(ids[:i])
                        z = pol.logits(key)
                        p = np.exp(z - z.max())
                        p /= p.sum()
                        grad = -p
                        grad[tok] += 1.0
                        pol.table[key] = list(z + self.options.lr * a * grad)
        self.updates += 1
        return {"flat_groups": float(flat), "updates": float(self.updates)}

    def close(self) -> None:
        # leaves a trace, so tests can check the loop's promise to close after training
        (Path(self.context.run_dir) / "toy-algorithm-closed").write_text(str(self.updates))

    def save(self, path: Path) -> None:
        # the policy's weights beside algorithm/, where evaluation looks for them
        self.policy.save(policy_dir(path))
        path.mkdir(parents=True, exist_ok=True)
        (path / "reinforce.json").write_text(json.dumps({"updates": self.updates}))

    def load(self, path: Path) -> None:
        # up to fa4cf36 this algorithm kept the policy's file in its own folder
        self.policy.load(path if (path / "menu_policy.json").exists() else find_policy_dir(path.parent))
        try:
            self.updates = json.loads((path / "reinforce.json").read_text())["updates"]
        except (OSError, ValueError, KeyError) as e:
            raise CheckpointError(f"{path / 'reinforce.json'} cannot be read: {e}") from None


@hookimpl
def register_policies() -> list[type]:
    return [MenuPolicy]


@hookimpl
def register_algorithms() -> list[type]:
    return [Reinforce]


from coevolve_sdk.evolution.signals import CompetenceHistory, SignalDetector  # noqa: E402
from coevolve_sdk.records import Signal  # noqa: E402


class MixedGroup(SignalDetector):
    """Marks every trajectory of a group holding both a success and a failure."""

    name = "toy-mixed"
    kind = "mixed"

    def observe(self, groups: list[RolloutGroup], history: CompetenceHistory, step: int) -> list[Signal]:
        out = []
        for g in groups:
            s = g.scores
            if max(s) > 0.5 and min(s) < 0.5:
                out += [Signal(kind=self.kind, task_id=g.task.id, trajectory_id=t.id, step=step, reason="mixed group") for t in g.trajectories]
        return out


@hookimpl
def register_signal_detectors() -> list[type]:
    return [MixedGroup]


from coevolve_sdk.evolution.teacher import RandomExplorer  # noqa: E402


class GatedExplorer(RandomExplorer):
    """The random explorer, holding every exploration until a file exists: lets a test stop a
    run while a background evolution round is provably still running."""

    name = "toy-gated-explorer"

    class Options(RandomExplorer.Options):
        gate: str = Field(description="Path of a file; exploration waits until it exists.")

    def explore(self, env, task, context, seed=0):  # type: ignore[no-untyped-def]
        import time

        while not Path(self.options.gate).exists():
            time.sleep(0.02)
        return super().explore(env, task, context, seed)


@hookimpl
def register_teachers() -> list[type]:
    return [GatedExplorer]


# Lifecycle hooks that leave a trace: every step's view of the run as the hook saw it (one file
# per step, so a replayed step rewrites its own), and what an evolution worker thread saw.
@hookimpl
def on_step_end(run, step, metrics):  # type: ignore[no-untyped-def]
    folder = Path(run.run_dir) / "toy-hooks"
    folder.mkdir(exist_ok=True)
    view = {"step": run.step, "pool_size": run.pool_size, "pool_counts": run.pool_counts(), "tasks": len(run.tasks()),
            "seed": run.config.seed, "reward": metrics["rollout/reward_mean"]}
    run.config.seed = -1  # a copy: the run's own config must not change
    (folder / f"step-{step:04d}.json").write_text(json.dumps(view))


@hookimpl
def on_tasks_proposed(run, step, candidates):  # type: ignore[no-untyped-def]
    import threading

    (Path(run.run_dir) / "toy-hooks").mkdir(exist_ok=True)
    (Path(run.run_dir) / "toy-hooks" / f"proposed-{step:04d}.json").write_text(
        json.dumps({"thread": threading.current_thread().name, "pool_size": run.pool_size}))
