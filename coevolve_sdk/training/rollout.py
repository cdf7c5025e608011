"""The multi-turn agent loop: K episodes per task, batched across every live episode.

Token-in/token-out. Each episode's token sequence starts as the rendered opening messages;
every turn the policy samples a completion for all live episodes at once, the environment
answers, and the answer is rendered with ``Policy.encode_followup`` and appended. History is
never re-tokenised, so the loss mask (1 on the agent's sampled tokens, 0 on prompt and
observation tokens) and the sampling logprobs line up with the tokens exactly.

The environment side (``reset``, ``step``, the final ``score``) runs one episode after another,
or, for environments that declare ``concurrent_steps`` and with ``env_workers > 1``, in a thread
pool, so that episodes waiting on I/O (AppWorld's HTTP workers) overlap. Everything that touches
the policy or the token bookkeeping stays in the calling thread and in episode order, so the
trajectories are the same either way: each episode's environment sees exactly the same calls.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar


from coevolve_sdk.config import RolloutConfig
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.ids import id_stream
from coevolve_sdk.training.policy import Policy
from coevolve_sdk.records import RolloutGroup, Task, Trajectory

__all__ = ["EnvPool", "collect_groups", "isolated_torch_rng", "tried_successes"]


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


_T = TypeVar("_T")
_R = TypeVar("_R")


class _EnvRunner:
    """Applies a function to a list of environments, in a thread pool when allowed.

    Results come back in the order of the inputs, so what the caller does with them does not
    depend on which thread finished first."""

    def __init__(self, workers: int, env_type: type) -> None:
        self.workers = workers if getattr(env_type, "concurrent_steps", False) else 1
        if workers > 1 and self.workers == 1:
            warnings.warn(
                f"rollout.env_workers={workers} is ignored for environment {getattr(env_type, 'name', '') or env_type.__name__}: "
                f"it does not declare concurrent_steps=True, so its episodes are stepped one at a time",
                RuntimeWarning, stacklevel=3,
            )
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> "_EnvRunner":
        if self.workers > 1:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="coevolve-env")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def map(self, fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        items = list(items)
        if self._pool is None or len(items) < 2:
            return [fn(x) for x in items]
        return list(self._pool.map(fn, items))


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


@contextmanager
def isolated_torch_rng(seed: int) -> Iterator[None]:
    """Sample from a stream of ``seed``'s inside, and leave torch's global random state (CPU and
    every GPU) as it was: episodes run on the side (evolution.admission_probe) must not move the
    training stream that a checkpoint records."""
    import torch  # the policies sample with torch's global generator

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def tried_successes(policy: Policy, envs: EnvPool, tasks: list[Task], settings: RolloutConfig, tries: int, step: int,
                    seed: int) -> list[int]:
    """How many of ``tries`` sampled episodes (as in training) the policy solves on each task:
    evolution.admission_probe's test of whether a task sits at the agent's boundary. Its random
    draws come from ``seed`` and leave the training stream where it was, so a run whose round is
    reused on resume (the tries not run again) samples as an uninterrupted one does; the
    episodes are counted by the round, not stored."""
    with isolated_torch_rng(seed), id_stream("probe", seed, step):
        groups = collect_groups(policy, envs, tasks, settings.model_copy(update={"group_size": tries}), step, seed=seed)
    return [sum(1 for tr in g.trajectories if tr.success) for g in groups]


def collect_groups(
    policy: Policy,
    envs: EnvPool,
    tasks: list[Task],
    settings: RolloutConfig,
    step: int,
    *,
    greedy: bool = False,
    seed: int = 0,
) -> list[RolloutGroup]:
    """Roll out ``settings.group_size`` episodes of every task; one group per task, in order."""
    k = settings.group_size
    slots = [(ti, task, j) for ti, task in enumerate(tasks) for j in range(k)]
    acquired = [envs.acquire() for _ in slots]
    if not acquired:
        return []
    try:
        with _EnvRunner(settings.env_workers, type(acquired[0])) as runner:
            return _roll_out(policy, acquired, slots, runner, settings, step, greedy=greedy, seed=seed)
    finally:
        for env in acquired:
            envs.release(env)
        # a policy that keeps each conversation's cache between turns (the hf policy) frees it:
        # these conversations are over, and the memory is wanted by what comes next (an update)
        release = getattr(policy, "release_turn_caches", None)
        if callable(release):
            release()


def _roll_out(
    policy: Policy,
    acquired: list[AgentEnv],
    slots: list[tuple[int, Task, int]],
    runner: _EnvRunner,
    settings: RolloutConfig,
    step: int,
    *,
    greedy: bool,
    seed: int,
) -> list[RolloutGroup]:
    def reset(item: tuple[AgentEnv, tuple[int, Task, int]]) -> dict[str, Any]:
        env, (ti, task, j) = item
        return env.reset(seed=seed * 1_000_003 + ti * 101 + j, options={"task": task})[1]

    episodes: list[_Episode] = []
    for env, (_, task, _), info in zip(acquired, slots, runner.map(reset, zip(acquired, slots))):
        ids = policy.encode_prompt(info["messages"], info["tools"])
        episodes.append(_Episode(task, env, list(ids), [0] * len(ids), [0.0] * len(ids), len(ids), list(info["messages"])))

    while True:
        live = [e for e in episodes if not e.done]
        if not live:
            break
        gens = policy.generate(
            [e.ids for e in live], max_new_tokens=settings.max_new_tokens, temperature=settings.temperature, greedy=greedy
        )
        answers = runner.map(lambda pair: pair[0].env.step(pair[1].text), zip(live, gens))
        for ep, g, (_, _, terminated, truncated, info) in zip(live, gens, answers):
            ep.ids.extend(g.token_ids)
            ep.mask.extend([1] * len(g.token_ids))
            ep.logprobs.extend(g.logprobs)
            ep.gen_tokens += len(g.token_ids)
            if not g.finished:
                ep.ids.append(policy.eos_token_id)
                ep.mask.append(0)
                ep.logprobs.append(0.0)
            ep.turns += 1
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
    scores = runner.map(lambda ep: ep.env._checked_score(), episodes)

    groups: list[RolloutGroup] = []
    by_task: dict[int, list[Trajectory]] = {}
    for ep, (ti, task, _), raw in zip(episodes, slots, scores):
        env = ep.env
        score = min(1.0, max(0.0, raw))
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
        by_task.setdefault(ti, []).append(traj)
    for ti in sorted(by_task):
        groups.append(RolloutGroup(task=slots[ti * settings.group_size][1], step=step, trajectories=by_task[ti]))
    groups[0].trajectories[0].info["env_threads"] = runner.workers
    return groups
