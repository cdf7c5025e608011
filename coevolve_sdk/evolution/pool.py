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
    from coevolve_sdk.storage.store import RunStore

__all__ = ["TaskPool", "TaskSampler", "UniformSampler", "SyntheticShareSampler"]


class SamplerOptions(ComponentOptions):
    pass


class TaskSampler(Component, ABC):
    """Chooses ``n`` tasks for a step. Must be deterministic given ``rng``."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[SamplerOptions]] = SamplerOptions

    @abstractmethod
    def sample(self, tasks: list[Task], n: int, rng: np.random.Generator, step: int) -> list[Task]:
        """Pick ``n`` tasks (with replacement only if the pool is smaller than ``n``)."""


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
