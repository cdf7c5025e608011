"""Algorithm: one optimisation step of the policy on a batch of rollout groups.

It owns the trainable model and its optimiser (the policy object shares the model), and it is
the seam for distributed training: the loop asks the algorithm how many processes there are
and uses its ``broadcast``/``gather`` so that the pool, the store and the teacher live on the
main process only, while rollouts and gradients are split across all of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from .components import Component, ComponentOptions
from .types import RolloutGroup, Task

__all__ = ["Algorithm", "AlgorithmOptions"]


class AlgorithmOptions(ComponentOptions):
    pass


class Algorithm(Component, ABC):
    """Implementers provide ``step``, ``save`` and ``load``; the rest has single-process defaults.

    The loop guarantees: ``step`` receives only this process's groups, in the order they were
    rolled out; ``save`` is called on every process with the same directory (write from the
    main process only, or through ``Accelerator.save_state``); ``load`` is called before the
    first step of a resumed run.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = AlgorithmOptions

    @abstractmethod
    def step(self, groups: list[RolloutGroup]) -> dict[str, float]:
        """Update the policy from the groups; return metrics (floats) to record."""

    @abstractmethod
    def save(self, path: Path) -> None:
        """Write model, optimiser and scheduler state under ``path``."""

    @abstractmethod
    def load(self, path: Path) -> None:
        """Restore what ``save`` wrote."""

    def warm_start(self, tasks: list[Task]) -> dict[str, float]:
        """Optional supervised warm start on the reference actions of seed tasks."""
        return {}

    # ---- distribution: trivial in one process
    @property
    def world_size(self) -> int:
        return 1

    @property
    def rank(self) -> int:
        return 0

    @property
    def is_main_process(self) -> bool:
        return self.rank == 0

    def broadcast(self, obj: Any) -> Any:
        """Send the main process's ``obj`` to every process."""
        return obj

    def gather(self, items: list[Any]) -> list[Any]:
        """Concatenate every process's list on every process (in rank order)."""
        return items

    def barrier(self) -> None:
        return None

    def close(self) -> None:
        """Release what the algorithm holds across processes (its process group).

        The loop calls it on every process once training has finished (after the last
        checkpoint, before the final evaluation, which runs on the main process alone). A
        process group left to the interpreter's exit can abort the process while its
        communication threads are torn down, turning a finished run into a failure. It is not
        called when a process fails: its peers may be inside a collective, and tearing the group
        down then can hang instead of exiting. Must be safe to call twice."""
        return None
