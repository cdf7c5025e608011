"""How the processes of a training run talk to each other: the distributed-training seam.

The loop runs the same code on every process of a run (one, or several under ``accelerate
launch`` / ``torchrun``): each rolls out its share of a step's tasks and takes part in the
update, while the pool, the store, the detectors and the teacher live on the main process. The
loop needs five things for that — the number of processes, this one's rank, ``broadcast`` (the
main process's value to all), ``gather`` (every process's list to all) and ``barrier`` — and
asks its algorithm for them (``Algorithm.processes``), because the algorithm owns the process
group (GRPO's is Accelerate's). An algorithm that trains in one process inherits ``ONE_PROCESS``
and has nothing to write.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Processes", "ONE_PROCESS"]


class Processes:
    """One process: broadcast and gather return what they are given, the barrier is a no-op.
    Subclass it for a process group; every method must be called by every process in the same
    order (they are collectives)."""

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
        """The main process's ``obj`` on every process (the others pass anything, e.g. None)."""
        return obj

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's list, concatenated in rank order, on every process."""
        return list(items)

    def barrier(self) -> None:
        """Wait until every process has reached this point."""
        return None

    def close(self) -> None:
        """Release the process group once training has finished (called on every process,
        after the last checkpoint; not after a failure, when a peer may be inside a collective).
        Must be safe to call twice."""
        return None


ONE_PROCESS = Processes()
