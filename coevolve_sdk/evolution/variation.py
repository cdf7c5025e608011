"""Variations of a known action sequence: the offline explorer's answer to "practise these
operations with different parameters" (the paper's forgetting and boundary guidance, Fig. 10).

Given a template (the reference actions of a task the agent is unstable on, or the actions of a
rare trajectory), a variation keeps the template's *structure* — the same tools in the same order,
the same value wherever the template repeats a value, and a number copied from an earlier
observation copied again from the corresponding new observation — while drawing the concrete
values afresh from the live state through the environment's own ``sample_action``. So a
"count the nuts in bin B, then remove that many from bin B" template may come back as "count the
gears in bin D, then remove that many from bin D", which a purely random walk almost never
produces. Nothing here knows any particular environment: it needs only tool-call actions, the
environment's ``sample_action`` and its observations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from coevolve_sdk.env.actions import ToolCall, calls_in, format_tool_call
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.records import Task

__all__ = ["VariedStep", "vary_actions", "vary_composed", "single_call"]


@dataclass
class VariedStep:
    action: str
    observation: str
    reward: float
    ok: bool


def single_call(action: str) -> ToolCall | None:
    """The one tool call of ``action``, or None (a final message, malformed text, several calls)."""
    calls = calls_in(action)
    return calls[0] if len(calls) == 1 else None


def _hashable(v: Any) -> bool:
    return isinstance(v, (str, int)) and not isinstance(v, bool)


def _as_int(text: str) -> int | None:
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    return None


def _observations(env: AgentEnv, task: Task, actions: list[str], seed: int) -> list[str]:
    """What the template's actions observe on ``task`` (to find numbers the template copied)."""
    env.reset(seed=seed, options={"task": task})
    out = []
    for a in actions:
        if env.done:
            break
        obs, _, _, _, _ = env.step(a)
        out.append(obs)
    return out


def _template_calls(template: list[str]) -> tuple[list[ToolCall], list[str]]:
    calls = [c for c in (single_call(a) for a in template) if c is not None]
    return calls, [format_tool_call(c.name, c.arguments) for c in calls]


def vary_actions(env: AgentEnv, task: Task, template: list[str], rng: np.random.Generator, *, proposals: int = 8,
                 distinct: bool = False) -> list[VariedStep]:
    """Run one variation of ``template`` on a fresh episode of ``task`` and return its steps.

    Template actions that are not a single tool call (final messages) are skipped. For each
    template call, ``proposals`` random actions are drawn from the live state; among those calling
    the same tool, the one most consistent with the values already renamed gives the fresh values
    (so the arguments of one call stay jointly valid). An argument equal to a value renamed
    earlier takes the same new value; an integer that equals an earlier observation of the
    template (a count it read) takes the corresponding new observation; with ``distinct``, two
    different values of the template never take the same new value (without it, which the runs
    published before it used, "from bin C to bin D" can become "from C to C"). When no proposal
    calls the tool, the template's own values are kept. The environment is left after the variation's
    last step, so the caller may continue exploring from there."""
    calls, actions = _template_calls(template)
    seed = int(rng.integers(0, 2**31 - 1))
    before = _observations(env, task, actions, seed) if actions else []
    env.reset(seed=seed, options={"task": task})
    return _vary_live(env, calls, before, rng, proposals=proposals, distinct=distinct)


def vary_composed(env: AgentEnv, task: Task, template: list[str], partner: Task, partner_template: list[str],
                  rng: np.random.Generator, *, proposals: int = 8, distinct: bool = False) -> list[VariedStep]:
    """A variation of ``template`` on a fresh episode of ``task``, followed in the same episode by
    a variation of ``partner_template`` (the actions of another task, ``partner``).

    Why: a variation keeps the skills of the task it varies, and a random walk seldom strings
    two particular skills together, so behaviour that the pool holds only apart (one task moves
    a few parts, another moves all of them) never meets in one request. Joining the two
    structures on one live state proposes that composition. Each part is varied as
    ``vary_actions`` varies it (the partner's copied counts are found on its own task's episode
    and copied again from this one's observations); the two parts rename their values
    independently. The environment is left after the last step."""
    calls, actions = _template_calls(template)
    pcalls, pactions = _template_calls(partner_template)
    seed = int(rng.integers(0, 2**31 - 1))
    pseed = int(rng.integers(0, 2**31 - 1))
    before = _observations(env, task, actions, seed) if actions else []
    pbefore = _observations(env, partner, pactions, pseed) if pactions else []
    env.reset(seed=seed, options={"task": task})
    steps = _vary_live(env, calls, before, rng, proposals=proposals, distinct=distinct)
    if len(steps) < len(calls) or not all(s.ok for s in steps):
        return steps  # the first part did not go through: nothing to join to it
    return steps + _vary_live(env, pcalls, pbefore, rng, proposals=proposals, distinct=distinct)


def _vary_live(env: AgentEnv, calls: list[ToolCall], before: list[str], rng: np.random.Generator, *, proposals: int,
               distinct: bool) -> list[VariedStep]:
    """Vary ``calls`` (whose observations on their own task were ``before``) on the environment's
    live episode, from wherever it stands."""
    rename: dict[Any, Any] = {}
    after: list[str] = []
    steps: list[VariedStep] = []
    for j, c in enumerate(calls):
        if env.done:
            break
        drawn = [single_call(env.sample_action()) for _ in range(proposals)]
        same = [d for d in drawn if d is not None and d.name == c.name]
        source: dict[str, Any] = {}
        if same:
            images = set(rename.values()) if distinct else set()

            def fit(d: ToolCall) -> int:
                """Already-renamed values this proposal agrees with, less the new values it would give
                to a template value that another template value already took: two different values
                of the template stay different (a "from bin C to bin D" must not become "from C to C")."""
                agree = sum(1 for k, v in c.arguments.items() if _hashable(v) and v in rename and d.arguments.get(k) == rename[v])
                clash = sum(1 for k, v in c.arguments.items()
                            if _hashable(v) and v not in rename and _hashable(d.arguments.get(k)) and d.arguments.get(k) in images)
                return agree - clash
            best = max(fit(d) for d in same)
            pool = [d for d in same if fit(d) == best]
            source = pool[int(rng.integers(0, len(pool)))].arguments
        args: dict[str, Any] = {}
        for k, v in c.arguments.items():
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                args[k] = v
                continue
            if isinstance(v, int):
                linked = next((i for i in range(min(j, len(before))) if _as_int(before[i]) == v), None)
                if linked is not None and linked < len(after) and _as_int(after[linked]) is not None:
                    args[k] = _as_int(after[linked])
                    continue
            if v in rename:
                args[k] = rename[v]
                continue
            new = source.get(k, v)
            if distinct and _hashable(new):
                taken = set(rename.values())
                if new in taken and v not in taken:  # taken by another template value: keep this one's own
                    new = v
            if isinstance(new, type(v)) and not isinstance(new, bool):
                rename[v] = new
                args[k] = new
            else:
                args[k] = v
        action = format_tool_call(c.name, args)
        obs, reward, _, _, info = env.step(action)
        after.append(obs)
        steps.append(VariedStep(action, obs, float(reward), not info.get("error")))
    return steps
