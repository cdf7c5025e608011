"""TaskPool: the evolving task set D_t, and how each step's tasks are drawn from it.

The pool is backed by the run store: a task is durable the moment ``admit`` returns, and tasks
are only ever appended (the paper never removes a task). Samplers are components, so a plugin
can replace uniform sampling with a curriculum.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from pydantic import Field

from coevolve_sdk.components.base import Component, ComponentOptions
from coevolve_sdk.records import Task

if TYPE_CHECKING:
    from coevolve_sdk.evolution.signals import CompetenceHistory
    from coevolve_sdk.storage.store import RunStore

__all__ = ["TaskPool", "TaskSampler", "UniformSampler", "SyntheticShareSampler", "FrontierSampler"]


class SamplerOptions(ComponentOptions):
    pass


class TaskSampler(Component, ABC):
    """Chooses ``n`` tasks for a step. Must be deterministic given ``rng``."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[SamplerOptions]] = SamplerOptions

    @abstractmethod
    def sample(self, tasks: list[Task], n: int, rng: np.random.Generator, step: int) -> list[Task]:
        """Pick ``n`` tasks (with replacement only if the pool is smaller than ``n``)."""

    def attach_history(self, history: CompetenceHistory) -> None:
        """Called once by the loop, before the first draw, with the run's per-task outcome
        history: every trajectory's step, score and success, recorded after each step and
        restored from the checkpoint on resume (so draws that read it resume exactly). A sampler
        that draws by how the agent does keeps the reference; the default ignores it."""


class UniformSampler(TaskSampler):
    """Every task in the pool equally likely (the paper's simplest reading)."""

    name = "uniform"

    def sample(self, tasks: list[Task], n: int, rng: np.random.Generator, step: int) -> list[Task]:
        if not tasks:
            return []
        replace = len(tasks) < n
        idx = rng.choice(len(tasks), size=n, replace=replace)
        return [tasks[int(i)] for i in idx]


class SyntheticShareSampler(TaskSampler):
    """Reserve a share of each batch for synthetic tasks, so new tasks are practised soon."""

    name = "synthetic-share"

    class Options(SamplerOptions):
        share: float = Field(0.5, ge=0.0, le=1.0, description="Fraction of the batch drawn from synthetic tasks when there are any.")

    def sample(self, tasks: list[Task], n: int, rng: np.random.Generator, step: int) -> list[Task]:
        synth = [t for t in tasks if t.origin == "synthetic"]
        rest = [t for t in tasks if t.origin != "synthetic"] or tasks
        k = min(len(synth), int(round(n * self.options.share))) if synth else 0  # type: ignore[attr-defined]
        uni = UniformSampler()
        return uni.sample(synth, k, rng, step) + uni.sample(rest, n - k, rng, step)


def attach_sampler(sampler: TaskSampler, history: CompetenceHistory) -> TaskSampler:
    """``sampler`` after handing it the run's outcome history (a plugin's failure names the plugin)."""
    from coevolve_sdk.components.blame import blame

    with blame(sampler, "attach_history"):
        sampler.attach_history(history)
    return sampler


class FrontierSampler(TaskSampler):
    """Draw the tasks the agent solved in every one of its latest tries less often.

    After a warm start most seed tasks are solved in every rollout of their group. Their equal
    rewards give GRPO no gradient, yet a uniform draw keeps spending rollouts on them (on the
    warehouse's dev checks, 70-78% of the seed tasks' groups). This sampler weights each task by
    its last ``window`` trajectories in the run's history: ``solved_weight`` when all of them
    succeeded, ``failed_weight`` when none did, 1 otherwise (mixed, or fewer than ``window``
    tries so far: a new or an admitted task is drawn like any other). Draws are without
    replacement, as uniform's, by the run's random generator; when every weight is zero the draw
    is uniform. ``synthetic_share``, when set, reserves that share of the batch for synthetic
    tasks as ``synthetic-share`` does, and weights each part the same way.
    """

    name = "frontier"

    class Options(SamplerOptions):
        window: int = Field(8, ge=1, description="How many of a task's latest trajectories decide whether it is mastered "
                                                 "(one group of the main job: rollout.group_size).")
        solved_weight: float = Field(0.25, ge=0.0, le=1.0, description="Draw weight of a task whose last `window` trajectories "
                                                                      "all succeeded (1 = uniform, 0 = never while others remain).")
        failed_weight: float = Field(1.0, ge=0.0, le=1.0, description="Draw weight of a task whose last `window` trajectories "
                                                                     "all failed (a guided run trains on its reference).")
        synthetic_share: float | None = Field(None, ge=0.0, le=1.0, description="When set, the fraction of the batch drawn from "
                                                                               "synthetic tasks when there are any (as synthetic-share).")

    #: the run's outcome history, from ``attach_history`` (without it every task weighs 1)
    history: CompetenceHistory | None = None

    def attach_history(self, history: CompetenceHistory) -> None:
        self.history = history

    def weight(self, task: Task) -> float:
        """The task's draw weight from its last ``window`` outcomes (1 without enough of them)."""
        o = self.options
        recent = self.history.outcomes(task.id)[-o.window :] if self.history is not None else []  # type: ignore[attr-defined]
        if len(recent) < o.window:  # type: ignore[attr-defined]
            return 1.0
        wins = sum(1 for _, _, ok in recent if ok)
        if wins == len(recent):
            return float(o.solved_weight)  # type: ignore[attr-defined]
        if wins == 0:
            return float(o.failed_weight)  # type: ignore[attr-defined]
        return 1.0

    def _draw(self, tasks: list[Task], n: int, rng: np.random.Generator) -> list[Task]:
        if not tasks or n <= 0:
            return []
        w = np.array([self.weight(t) for t in tasks], dtype=np.float64)
        if w.sum() <= 0:
            w = np.ones(len(tasks))
        if len(tasks) < n:
            idx = rng.choice(len(tasks), size=n, replace=True, p=w / w.sum())
            return [tasks[int(i)] for i in idx]
        # weighted draw without replacement: the n largest u ** (1 / w) (Efraimidis-Spirakis);
        # a zero weight sorts last, so it is drawn only when the others run out
        u = rng.random(len(tasks))
        keys = np.where(w > 0, u ** (1.0 / np.maximum(w, 1e-12)), -1.0 + u)
        order = np.argsort(-keys, kind="stable")[:n]
        return [tasks[int(i)] for i in order]

    def sample(self, tasks: list[Task], n: int, rng: np.random.Generator, step: int) -> list[Task]:
        share = self.options.synthetic_share  # type: ignore[attr-defined]
        if share is None:
            return self._draw(tasks, n, rng)
        synth = [t for t in tasks if t.origin == "synthetic"]
        rest = [t for t in tasks if t.origin != "synthetic"] or tasks
        k = min(len(synth), int(round(n * share))) if synth else 0
        return self._draw(synth, k, rng) + self._draw(rest, n - k, rng)


class TaskPool:
    """D_t: the training tasks, in admission order, with a fingerprint index for dedup."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._tasks: list[Task] = store.load_tasks(split="train")
        self._by_id = {t.id: t for t in self._tasks}
        self._fingerprints = {t.fingerprint() for t in self._tasks}

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._tasks)

    @property
    def tasks(self) -> list[Task]:
        return list(self._tasks)

    @property
    def fingerprints(self) -> set[str]:
        return set(self._fingerprints)

    def get(self, task_id: str) -> Task | None:
        return self._by_id.get(task_id)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self._tasks:
            out[t.origin] = out.get(t.origin, 0) + 1
        return out

    def admit(self, tasks: list[Task], step: int) -> list[Task]:
        """Write new tasks durably, skipping exact duplicates; returns those admitted."""
        fresh: list[Task] = []
        for t in tasks:
            fp = t.fingerprint()
            if fp in self._fingerprints or t.id in self._by_id:
                continue
            self._fingerprints.add(fp)
            fresh.append(t)
        if fresh:
            self.store.add_tasks(fresh, step=step)
            for t in fresh:
                self._tasks.append(t)
                self._by_id[t.id] = t
        return fresh

    def sample(self, sampler: TaskSampler, n: int, rng: np.random.Generator, step: int) -> list[Task]:
        return sampler.sample(self._tasks, n, rng, step)
