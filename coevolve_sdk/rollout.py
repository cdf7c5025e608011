"""The multi-turn agent loop: K episodes per task, batched across every live episode.

Token-in/token-out. Each episode's token sequence starts as the rendered opening messages;
every turn the policy samples a completion for all live episodes at once, the environment
answers, and the answer is rendered with ``Policy.encode_followup`` and appended. History is
never re-tokenised, so the loss mask (1 on the agent's sampled tokens, 0 on prompt and
observation tokens) and the sampling logprobs line up with the tokens exactly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from .environment import AgentEnv
from .policy import Policy
from .types import RolloutGroup, Task, Trajectory

__all__ = ["RolloutSettings", "EnvPool", "collect_groups", "evaluate"]


class RolloutSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group_size: int = Field(8, ge=1, description="Trajectories per task, K (paper: 8).")
    max_new_tokens: int = Field(96, ge=1, description="Tokens the agent may generate per turn.")
    temperature: float = Field(0.9, ge=0.0, description="Sampling temperature in training (paper: 0.9).")
    max_context_tokens: int = Field(2048, ge=16, description="An episode whose tokens would exceed this is truncated.")


class EnvPool:
    """Environment instances reused across steps (creating some environments is not cheap)."""

    def __init__(self, factory: Callable[[], AgentEnv]) -> None:
        self.factory = factory
        self._free: list[AgentEnv] = []

    def acquire(self) -> AgentEnv:
        return self._free.pop() if self._free else self.factory()

    def release(self, env: AgentEnv) -> None:
        self._free.append(env)

    def close(self) -> None:
        for env in self._free:
            try:
                env.close()
            except Exception:
                pass
        self._free.clear()


@dataclass
class _Episode:
    task: Task
    env: AgentEnv
    ids: list[int]
    mask: list[int]
    logprobs: list[float]
    prompt_length: int
    messages: list[dict[str, Any]]
    done: bool = False
    truncated: bool = False
    turns: int = 0
    gen_tokens: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def collect_groups(
    policy: Policy,
    envs: EnvPool,
    tasks: list[Task],
    settings: RolloutSettings,
    step: int,
    *,
    greedy: bool = False,
    seed: int = 0,
    on_turn: Callable[[int, int], None] | None = None,
) -> list[RolloutGroup]:
    """Roll out ``settings.group_size`` episodes of every task; one group per task, in order."""
    k = settings.group_size
    episodes: list[_Episode] = []
    for ti, task in enumerate(tasks):
        for j in range(k):
            env = envs.acquire()
            _, info = env.reset(seed=seed * 1_000_003 + ti * 101 + j, options={"task": task})
            ids = policy.encode_prompt(info["messages"], info["tools"])
            episodes.append(
                _Episode(task, env, list(ids), [0] * len(ids), [0.0] * len(ids), len(ids), list(info["messages"]))
            )
    t0 = time.perf_counter()
    turn = 0
    while True:
        live = [e for e in episodes if not e.done]
        if not live:
            break
        gens = policy.generate(
            [e.ids for e in live], max_new_tokens=settings.max_new_tokens, temperature=settings.temperature, greedy=greedy
        )
        for ep, g in zip(live, gens):
            ep.ids.extend(g.token_ids)
            ep.mask.extend([1] * len(g.token_ids))
            ep.logprobs.extend(g.logprobs)
            ep.gen_tokens += len(g.token_ids)
            if not g.finished:
                ep.ids.append(policy.eos_token_id)
                ep.mask.append(0)
                ep.logprobs.append(0.0)
            ep.turns += 1
            _, _, terminated, truncated, info = ep.env.step(g.text)
            ep.messages.append({"role": "assistant", "content": g.text})
            ep.messages.extend(info.get("messages", []))
            if terminated or truncated:
                ep.done, ep.truncated = True, bool(truncated)
                continue
            follow = policy.encode_followup(info.get("messages", []))
            if len(ep.ids) + len(follow) + settings.max_new_tokens > settings.max_context_tokens:
                ep.done, ep.truncated = True, True
                ep.info["context_exhausted"] = True
                continue
            ep.ids.extend(follow)
            ep.mask.extend([0] * len(follow))
            ep.logprobs.extend([0.0] * len(follow))
        turn += 1
        if on_turn is not None:
            on_turn(turn, sum(1 for e in episodes if not e.done))
    elapsed = time.perf_counter() - t0

    groups: list[RolloutGroup] = []
    for ti, task in enumerate(tasks):
        trajs = []
        for ep in episodes[ti * k : (ti + 1) * k]:
            env = ep.env
            score = min(1.0, max(0.0, float(env.score())))
            traj = Trajectory(
                task_id=task.id,
                env=env.name,
                step=step,
                messages=ep.messages,
                steps=list(env.steps),
                score=score,
                success=score >= env.success_threshold,
                truncated=ep.truncated,
                info={"turns": ep.turns, "generated_tokens": ep.gen_tokens, **ep.info},
                token_ids=ep.ids,
                loss_mask=ep.mask,
                logprobs=ep.logprobs,
                prompt_length=ep.prompt_length,
            )
            traj.action_pattern = env.action_pattern(traj)
            trajs.append(traj)
            envs.release(env)
        groups.append(RolloutGroup(task=task, step=step, trajectories=trajs))
    if groups:
        groups[0].trajectories[0].info["rollout_seconds"] = elapsed
    return groups


def evaluate(policy: Policy, envs: EnvPool, tasks: list[Task], settings: RolloutSettings, step: int) -> dict[str, Any]:
    """Greedy, one episode per task: the paper's evaluation protocol."""
    eval_settings = settings.model_copy(update={"group_size": 1, "temperature": 0.0})
    groups = collect_groups(policy, envs, tasks, eval_settings, step, greedy=True)
    trajs = [g.trajectories[0] for g in groups]
    n = max(1, len(trajs))
    return {
        "tasks": len(trajs),
        "success_rate": sum(t.success for t in trajs) / n,
        "mean_score": sum(t.score for t in trajs) / n,
        "trajectories": trajs,
    }
