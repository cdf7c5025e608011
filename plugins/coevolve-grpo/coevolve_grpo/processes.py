"""GRPO's process group: the SDK's ``Processes`` seam over Accelerate and ``torch.distributed``.

Kept apart from the algorithm so that the optimisation code reads as one process's work and the
collectives live in one place. One hook ties them: the warm start changes the weights on the main
process only, outside any collective, so before the next broadcast the algorithm brings every
process to the main process's weights (``before_broadcast``)."""

from __future__ import annotations

from typing import Any, Callable

from coevolve_sdk import Processes

__all__ = ["AccelerateProcesses"]


class AccelerateProcesses(Processes):
    def __init__(self, accelerator: Any, before_broadcast: Callable[[], None] = lambda: None) -> None:
        self.accelerator = accelerator
        self.before_broadcast = before_broadcast

    @property
    def world_size(self) -> int:
        return int(self.accelerator.num_processes)

    @property
    def rank(self) -> int:
        return int(self.accelerator.process_index)

    @property
    def is_main_process(self) -> bool:
        return bool(self.accelerator.is_main_process)

    def broadcast(self, obj: Any) -> Any:
        if self.world_size == 1:
            return obj
        self.before_broadcast()
        return self.send(obj)

    def send(self, obj: Any) -> Any:
        """The bare broadcast of a picklable object from the main process (no weight sync)."""
        from accelerate.utils import broadcast_object_list

        box = [obj if self.is_main_process else None]
        broadcast_object_list(box, from_process=0)
        return box[0]

    def gather(self, items: list[Any]) -> list[Any]:
        if self.world_size == 1:
            return list(items)
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, list(items))
        return [x for part in parts for x in part]

    def barrier(self) -> None:
        self.accelerator.wait_for_everyone()

    def close(self) -> None:
        """Tear the process group down ourselves: left to interpreter exit, gloo's threads can
        be destroyed while still joinable, and the C++ runtime aborts the process (seen as a
        random SIGABRT of one rank after a run that had finished)."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()

    def sum(self, values: list[float]) -> list[float]:
        """Sum a few numbers over all processes."""
        if self.world_size == 1:
            return list(values)
        import torch

        t = torch.tensor(values, dtype=torch.float64, device=self.accelerator.device)
        return self.accelerator.reduce(t, reduction="sum").tolist()

    def max(self, value: int) -> int:
        """The largest of one integer over all processes."""
        if self.world_size == 1:
            return value
        import torch

        t = torch.tensor([value], dtype=torch.long, device=self.accelerator.device)
        return int(self.accelerator.gather(t).max().item())
