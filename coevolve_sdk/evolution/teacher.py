"""Teacher: reflect on a signalled trajectory, re-explore the real environment, abstract tasks.

The three stages follow the paper (§3.2–3.3). ``RandomExplorer`` is the teacher that needs no
LLM: it is the paper's "random exploration" arm and the offline default. The LLM teacher
(``LiteLLMTeacher``, in the plugin distribution ``coevolve-litellm``) implements the same
interface.

Teachers record what each call cost through ``record_usage``; the evolution stage opens a
meter per signal (``usage_meter``) so cost is attributed to the signal and to the tasks it
produced, even when signals are processed concurrently.
"""

from __future__ import annotations

import contextlib
import contextvars
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterator

import numpy as np
from pydantic import Field

from coevolve_sdk.env.actions import calls_in
from coevolve_sdk.components.base import Component, ComponentOptions
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.evolution.variation import vary_actions, vary_composed
from coevolve_sdk.records import (
    CandidateTask, ExplorationContext, Signal, Step, Task, TeacherStages, TeacherUsage, Trajectory, Triplet,
)

__all__ = ["Teacher", "TeacherOptions", "RandomExplorer", "usage_meter", "record_usage", "action_tools"]

_METER: contextvars.ContextVar[TeacherUsage | None] = contextvars.ContextVar("coevolve_teacher_usage", default=None)


@contextlib.contextmanager
def usage_meter() -> Iterator[TeacherUsage]:
    """Collect the usage of every teacher call made inside the block (this thread/task only)."""
    meter = TeacherUsage()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def record_usage(usage: TeacherUsage) -> None:
    meter = _METER.get()
    if meter is not None:
        meter.add(usage)


def action_tools(action: str) -> list[str]:
    """Tool names an action would call, when it is in the ``<tool_call>`` format."""
    return [c.name for c in calls_in(action)]


class TeacherOptions(ComponentOptions):
    rounds: int = Field(3, ge=1, description="Independent exploration rounds per signal.")
    steps_per_round: int = Field(6, ge=1, description="Actions per exploration round.")
    min_actions: int = Field(3, ge=1, description="Shortest reference action sequence a task may have (paper: 3).")
    max_actions: int = Field(8, ge=1, description="Longest reference action sequence kept.")
    max_candidates: int = Field(3, ge=1, description="Candidate tasks abstracted per signal at most.")


class Teacher(Component, ABC):
    """The data half of the mutual evolution.

    Implementers provide ``reflect``, ``explore`` and ``abstract``. The evolution stage
    guarantees that ``explore`` gets an environment instance of its own (safe to reset and
    step), and that every candidate is validated by execution before it can join the pool, so
    a teacher may propose freely.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[TeacherOptions]] = TeacherOptions
    prompt_version: ClassVar[str] = "none"

    @abstractmethod
    def reflect(self, signal: Signal, trajectory: Trajectory, task: Task) -> ExplorationContext:
        """Read the signalled trajectory; say what went wrong and what to explore."""

    @abstractmethod
    def explore(self, env: AgentEnv, task: Task, context: ExplorationContext, seed: int = 0) -> list[Triplet]:
        """Act in a fresh instance of ``task``'s environment under the guidance of ``context``."""

    @abstractmethod
    def abstract(
        self, env: AgentEnv, task: Task, triplets: list[Triplet], context: ExplorationContext, existing: set[str]
    ) -> list[CandidateTask]:
        """Turn goal-directed stretches of exploration into candidate tasks not in ``existing``
        (a set of ``Task.fingerprint()`` values)."""

    @property
    def wants_partners(self) -> bool:
        """Whether ``explore`` uses ``ExplorationContext.partners`` (the round's other start
        tasks). The round fills them only for a teacher that says so, so a teacher that does not
        compose costs nothing and its exploration records stay as they were."""
        return False

    def judge(self, task: Task, trajectory: Trajectory) -> bool | None:
        """Optional second opinion on whether ``trajectory`` solved ``task``; None abstains."""
        return None

    def stages(self) -> TeacherStages | None:
        """Optional: what this teacher's model replies did at each stage so far (counts and the
        first replies), for the run's record. Each evolution round stores it with the round and
        the run report shows it, so a round that admitted nothing says whether the model's
        replies failed to parse, explored nothing usable, or proposed tasks that validation
        rejected. None (the default): nothing to show, as for a teacher without a model."""
        return None

    def seed_tasks(self, env: AgentEnv, bases: list[Task], n: int, existing: set[str], seed: int = 0) -> list[CandidateTask]:
        """Unguided exploration for the initial pool D_0: explore from each base task with a
        neutral context and abstract what was found, until ``n`` candidates are gathered."""
        out: list[CandidateTask] = []
        seen = set(existing)
        i = 0
        while len(out) < n and bases and i < 20 * max(n, 1):
            base = bases[i % len(bases)]
            ctx = ExplorationContext(signal_kind="seed", summary="Unguided exploration of the environment.")
            triplets = self.explore(env, base, ctx, seed=seed + i)
            for c in self.abstract(env, base, triplets, ctx, seen):
                if c.fingerprint() in seen:
                    continue
                seen.add(c.fingerprint())
                c.parent_task_id = base.id
                c.signal_kind = "seed"
                out.append(c)
                if len(out) >= n:
                    break
            i += 1
        return out


class RandomExplorer(Teacher):
    """Explores with the environment's ``sample_action``, biased toward the signalled tools.

    Reflection needs no model: the context lists the tools the signalled trajectory called
    (the skill to practise). Exploration draws several valid actions from the live state and
    prefers those that call a focus tool (probability ``focus_bias``). Abstraction keeps each
    round's successful actions and lets the environment's templater write the query.
    """

    name = "random-explorer"
    prompt_version = "random-v1"

    class Options(TeacherOptions):
        focus_bias: float = Field(0.7, ge=0.0, le=1.0, description="Chance of preferring an action that calls a tool of the signalled trajectory.")
        proposals: int = Field(4, ge=1, description="Actions drawn per step to choose from.")
        variation: float = Field(
            0.0, ge=0.0, le=1.0,
            description="Share of exploration rounds that vary the signalled behaviour (same tools in the same order, fresh "
                        "values from the live state, copied values kept copied; see coevolve_sdk.evolution.variation) before "
                        "exploring on at random. A signal varies its task's reference actions, or the signalled trajectory's own "
                        "actions when its detector says so (Signal.vary; the rare detector does).",
        )
        compose: float = Field(
            0.0, ge=0.0, le=1.0,
            description="Share of exploration rounds that join two behaviours in one episode: a variation of the signalled "
                        "behaviour (without a signal, of the start task's own actions) followed by a variation of another "
                        "start task of the same round (ExplorationContext.partners: the other signalled tasks in a guided "
                        "round, the other random starts in an unguided one). A variation keeps the skills of what it varies "
                        "and a random walk seldom strings two given skills together, so a composition the pool holds only "
                        "apart is otherwise never proposed. Drawn before `variation`; 0 (the default) leaves the explorer, "
                        "and its random draws, as they were.",
        )
        variation_alone: bool = Field(
            False,
            description="Propose each variation on its own first (its calls only, before the random calls that follow it in "
                        "the round), then the whole rounds. A round's random continuation can push a varied task past what one "
                        "request of the world can say (the warehouse phrases at most two skills), so without this a signalled "
                        "task of three calls is rarely proposed again with fresh values. Also keeps two different values of the "
                        "template different in a variation (without it 'from bin C to bin D' can become 'from C to C'). Off: the "
                        "explorer of the runs published before it.",
        )

    @property
    def wants_partners(self) -> bool:
        return self.options.compose > 0  # type: ignore[attr-defined]

    def reflect(self, signal: Signal, trajectory: Trajectory, task: Task) -> ExplorationContext:
        tools: list[str] = []
        for s in trajectory.steps:
            for name in s.info.get("tool_names", []):
                if name not in tools:
                    tools.append(name)
        outcome = "succeeded" if trajectory.success else "failed"
        return ExplorationContext(
            signal_kind=signal.kind,
            summary=f"On task '{task.query[:200]}' the agent {outcome} (score {trajectory.score:.2f}) after {len(trajectory.steps)} actions.",
            failure_cause=signal.reason,
            focus_pattern=[trajectory.action_pattern] if trajectory.action_pattern else [],
            exploration_objectives=[f"practise {t}" for t in tools],
            focus_tools=tools,
            focus_actions=_focus_actions(signal, trajectory, task),
        )

    def explore(self, env: AgentEnv, task: Task, context: ExplorationContext, seed: int = 0) -> list[Triplet]:
        opts: RandomExplorer.Options = self.options  # type: ignore[assignment]
        from coevolve_sdk.components.blame import blame  # an environment's bug here is named, with its method and task

        rng = np.random.default_rng(seed)
        focus = set(context.focus_tools)
        triplets: list[Triplet] = []
        for r in range(opts.rounds):
            start = 0
            partners = [p for p in context.partners if p.id != task.id and p.reference_actions] if opts.compose > 0 else []
            if partners and rng.random() < opts.compose:
                partner = partners[int(rng.integers(0, len(partners)))]
                with blame(env, "step", task):
                    varied = vary_composed(env, task, context.focus_actions or list(task.reference_actions), partner,
                                           list(partner.reference_actions), rng, proposals=2 * opts.proposals,
                                           distinct=opts.variation_alone)
                for k, v in enumerate(varied):
                    triplets.append(Triplet(action=v.action, observation=v.observation, round=r, step=k, reward=v.reward, ok=v.ok,
                                            varied=True, composed_with=partner.id))
                start = len(varied)
            elif context.focus_actions and rng.random() < opts.variation:
                with blame(env, "step", task):
                    varied = vary_actions(env, task, context.focus_actions, rng, proposals=2 * opts.proposals, distinct=opts.variation_alone)
                for k, v in enumerate(varied):
                    triplets.append(Triplet(action=v.action, observation=v.observation, round=r, step=k, reward=v.reward, ok=v.ok,
                                            varied=True))
                start = len(varied)
            else:
                with blame(env, "reset", task):
                    env.reset(seed=int(rng.integers(0, 2**31 - 1)), options={"task": task})
            for k in range(start, opts.steps_per_round):
                if env.done:
                    break
                with blame(env, "sample_action", task):
                    proposals = [env.sample_action() for _ in range(opts.proposals)]
                preferred = [a for a in proposals if focus.intersection(action_tools(a))]
                if preferred and rng.random() < opts.focus_bias:
                    action = preferred[int(rng.integers(0, len(preferred)))]
                else:
                    action = proposals[int(rng.integers(0, len(proposals)))]
                with blame(env, "step", task):
                    obs, reward, _, _, info = env.step(action)
                triplets.append(Triplet(action=action, observation=obs, round=r, step=k, reward=reward, ok=not info.get("error")))
        return triplets

    def abstract(
        self, env: AgentEnv, task: Task, triplets: list[Triplet], context: ExplorationContext, existing: set[str]
    ) -> list[CandidateTask]:
        opts: RandomExplorer.Options = self.options  # type: ignore[assignment]
        out: list[CandidateTask] = []
        seen = set(existing)
        rounds = sorted({t.round for t in triplets})
        spans: list[tuple[int, list[Triplet], bool]] = []  # (round, its calls, variation only)
        if opts.variation_alone:
            for r in rounds:
                varied = [t for t in triplets if t.round == r and t.varied]
                if varied and all(t.ok for t in varied):  # a varied call that failed: the variation is no task
                    spans.append((r, varied, True))
        spans += [(r, [t for t in triplets if t.round == r and t.ok], False) for r in rounds]
        for r, calls, alone in spans:
            good = calls[: opts.max_actions]
            if len(good) < opts.min_actions:
                continue
            steps = [Step(action=t.action, observation=t.observation) for t in good]
            from coevolve_sdk.components.blame import blame

            with blame(env, "describe", task):
                query = env.describe(task, steps)
            if not query.strip():  # the environment says these calls are no request of its world
                continue
            cand = CandidateTask(
                description=f"{context.signal_kind} exploration round {r}{' (its variation alone)' if alone else ''} from task {task.id}"
                            + (f" joined with task {good[0].composed_with}" if good[0].composed_with else ""),
                query=query,
                reference_actions=[t.action for t in good],
                completion_criterion="the environment's state and answers match those of the reference actions",
                parent_task_id=task.id,
                teacher=self.name,
                prompt_version=self.prompt_version,
                exploration={"round": r, "steps": len(good), "focus_tools": context.focus_tools}
                | ({"variation_alone": True} if alone else {})
                | ({"composed_with": good[0].composed_with} if good[0].composed_with else {}),
            )
            if cand.fingerprint() in seen:
                continue
            seen.add(cand.fingerprint())
            out.append(cand)
            if len(out) >= opts.max_candidates:
                break
        return out


def _focus_actions(signal: Signal, trajectory: Trajectory, task: Task) -> list[str]:
    """What a variation round varies: the signalled trajectory's own successful actions when the
    detector asked for that (``Signal.vary``, e.g. a rare pattern), otherwise the reference
    actions of the task the agent forgets or wavers on."""
    if signal.vary == "trajectory":
        return [s.action for s in trajectory.steps if not s.info.get("error")]
    return list(task.reference_actions)


def describe_triplets(triplets: list[Triplet], limit: int = 40) -> list[dict[str, Any]]:
    """A compact, JSON-friendly view of exploration for lineage records."""
    return [
        {"round": t.round, "step": t.step, "action": t.action[:300], "observation": t.observation[:300], "ok": t.ok}
        for t in triplets[:limit]
    ]
