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

from coevolve_sdk.components.base import Component, ComponentOptions
from coevolve_sdk.errors import ResumeError
from coevolve_sdk.training.processes import ONE_PROCESS, Processes
from coevolve_sdk.records import RolloutGroup, Task

__all__ = ["Algorithm", "AlgorithmOptions", "CheckpointError", "CheckpointMismatch", "policy_dir", "find_policy_dir"]


class CheckpointError(ResumeError):
    """A checkpoint's files are missing, damaged, or not data-only (a pickle that would have to
    run code to load). Raised by ``Algorithm.load`` and ``TrainablePolicy.load`` with the file
    and what is wrong with it, so the caller can say so and fall back to an older checkpoint."""


class CheckpointMismatch(CheckpointError):
    """A checkpoint that is intact but does not fit the components this run built (the model's
    size or architecture changed since it was written). Unlike damage, an older checkpoint would
    not fit either: resuming stops and says to undo the change; nothing is set aside."""


def policy_dir(algorithm_dir: Path) -> Path:
    """Where ``Algorithm.save(algorithm_dir)`` writes the policy's weights: the checkpoint's
    ``policy/`` folder, a sibling of its ``algorithm/`` folder, so that evaluation can open the
    weights without knowing which algorithm trained them."""
    return Path(algorithm_dir).parent / "policy"


def find_policy_dir(step_dir: Path) -> Path:
    """The policy folder of checkpoint ``step_dir``: ``step_dir/policy``, or, in run folders
    written before the policy moved there, ``step_dir/algorithm/policy``. CheckpointError
    when neither holds one."""
    step_dir = Path(step_dir)
    for cand in (step_dir / "policy", step_dir / "algorithm" / "policy"):
        if cand.is_dir():
            return cand
    raise CheckpointError(
        f"checkpoint {step_dir} has no policy weights (neither policy/ nor algorithm/policy/); it is incomplete or "
        "damaged: resume from an earlier checkpoint"
    )


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

    #: methods the loop once called on the algorithm and now reaches through ``processes``: an
    #: algorithm written for that API would have its process group silently ignored
    _MOVED_TO_PROCESSES: ClassVar[tuple[str, ...]] = ("world_size", "rank", "is_main_process", "broadcast", "gather", "barrier")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        moved = [m for m in cls._MOVED_TO_PROCESSES if m in vars(cls)]
        if moved:
            raise TypeError(
                f"algorithm class {cls.__qualname__} defines {', '.join(moved)}, which the loop no longer calls on an "
                "algorithm: return an object with these methods from the 'processes' property instead (a "
                "coevolve_sdk.Processes; see docs/plugins/write-an-algorithm.md), or the run would train each process alone"
            )

    @abstractmethod
    def step(self, groups: list[RolloutGroup]) -> dict[str, float]:
        """Update the policy from the groups; return metrics (floats) to record."""

    @abstractmethod
    def save(self, path: Path) -> None:
        """Write optimiser, scheduler and RNG state under ``path`` (a checkpoint's
        ``algorithm/`` folder) and the policy's weights to ``policy_dir(path)`` through
        ``TrainablePolicy.save``. Tensors as safetensors and the rest as JSON: never a pickle,
        so that loading someone else's run folder cannot run code."""

    @abstractmethod
    def load(self, path: Path) -> None:
        """Restore what ``save`` wrote (the weights through ``TrainablePolicy.load`` from
        ``find_policy_dir(path.parent)``). Raise CheckpointError naming the file when one is
        missing, damaged or would need an unpickler that can run code."""

    def warm_start(self, tasks: list[Task]) -> dict[str, float]:
        """Optional supervised warm start on the reference actions of seed tasks."""
        return {}

    @property
    def processes(self) -> Processes:
        """The processes this algorithm trains on, and how they talk (``broadcast``, ``gather``,
        ``barrier``): one process unless the algorithm runs a process group of its own (GRPO's is
        Accelerate's). The loop reaches the other processes only through this."""
        return ONE_PROCESS

    def close(self) -> None:
        """Release what the algorithm holds once training has finished. The loop calls it on
        every process after the last checkpoint, before the final evaluation, and then closes
        ``processes``. Must be safe to call twice."""
        return None
