"""RunView: what a lifecycle hook may look at while a run goes on, and nothing it could change.

Hooks used to receive the loop itself, mutable and shared with evolution worker threads. A
``RunView`` offers the run folder, the current step, a copy of the configuration and the
pool's size and counts, and copies of its tasks: a plugin that observes a run cannot change it
by accident, and reading the view from a worker thread (``on_tasks_proposed`` runs there) is
safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from coevolve_sdk.config import RunConfig

if TYPE_CHECKING:
    from coevolve_sdk.evolution.pool import TaskPool
    from coevolve_sdk.records import Task

__all__ = ["RunView"]


class RunView:
    def __init__(self, run_dir: Path, config: RunConfig, pool: "TaskPool", step: Callable[[], int]) -> None:
        self._run_dir = Path(run_dir)
        self._config = config
        self._pool = pool
        self._step = step

    @property
    def run_dir(self) -> Path:
        """The run folder (its store may be read with ``RunStore(path, read_only=True)``)."""
        return self._run_dir

    @property
    def step(self) -> int:
        """The training step the run is at (0 before training)."""
        return self._step()

    @property
    def config(self) -> RunConfig:
        """A copy of the run's configuration."""
        return self._config.model_copy(deep=True)

    @property
    def pool_size(self) -> int:
        return len(self._pool)

    def pool_counts(self) -> dict[str, int]:
        """Tasks in the pool by origin (seed, synthetic, benchmark)."""
        return self._pool.counts()

    def tasks(self, origin: str | None = None) -> list["Task"]:
        """Copies of the pool's tasks in admission order (only those of ``origin`` if given)."""
        return [t.model_copy(deep=True) for t in self._pool.tasks if origin is None or t.origin == origin]

    def task(self, task_id: str) -> "Task | None":
        t = self._pool.get(task_id)
        return t.model_copy(deep=True) if t is not None else None
