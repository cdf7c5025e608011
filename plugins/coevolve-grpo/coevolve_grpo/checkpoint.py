"""GRPO's checkpoints: what ``save`` writes (optimiser, scheduler, counters, RNG per process,
the KL reference; tensors as safetensors, the rest JSON) and how ``load`` reads it back,
including run folders of the older Accelerate layout. Nothing here unpickles anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevolve_sdk import (
    CheckpointError,
    policy_dir,
)

__all__ = ["Checkpoints"]


class Checkpoints:
    """The checkpoint methods of ``GRPO`` (a base class of it)."""

    def save(self, path: Path) -> None:
        """Write the trainer's state into ``path`` (a checkpoint's ``algorithm/`` folder) as data
        only, tensors in safetensors and the rest in JSON (see :mod:`coevolve_grpo.state_files`):

        * ``trainer.json``: counters, LR scheduler, how many processes wrote the checkpoint;
        * ``optimizer.json`` / ``.safetensors``: AdamW's state (``optimizer-rankN`` per process
          under DeepSpeed, whose optimiser state is partitioned);
        * ``rng-rankN.json`` / ``.safetensors``: each process's random generators;
        * ``reference.safetensors``: the KL reference model (β > 0).

        The policy's weights go to the sibling ``policy/`` folder through the policy's own
        ``save`` (gathered into full tensors first when they are sharded). Call on every process.
        """
        from safetensors.torch import save_model

        from .state_files import rng_state, save_tree

        path = Path(path)
        acc = self.accelerator
        path.mkdir(parents=True, exist_ok=True)
        weights = acc.get_state_dict(self.model)  # a collective when the parameters are sharded
        optim = self._optimizer_state()  # likewise
        save_tree(rng_state(), path, f"rng-rank{self._processes.rank}")
        if self._optimizer_per_rank:
            save_tree(optim, path, f"optimizer-rank{self._processes.rank}")
        if acc.is_main_process:
            self.policy.save(policy_dir(path), state_dict=weights)
            if not self._optimizer_per_rank:
                save_tree(optim, path, "optimizer")
            save_tree(
                {
                    "format": 2,
                    "counters": self.counters.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "processes": self._processes.world_size,
                    "reference": self.ref_model is not None,
                },
                path,
                "trainer",
            )
            if self.ref_model is not None:
                save_model(self.ref_model, str(path / "reference.safetensors"))
        acc.wait_for_everyone()

    def load(self, path: Path) -> None:
        """Restore what ``save`` wrote, or what versions before it wrote (``accelerate/``,
        ``policy/`` and ``reference/`` inside ``path``), without unpickling anything that could
        run code. CheckpointError names the file when one is missing or damaged."""
        path = Path(path)
        if (path / "trainer.json").is_file():
            self._load_current(path)
        elif (path / "accelerate").is_dir():
            self._load_legacy(path)
        else:
            raise CheckpointError(
                f"{path} holds no GRPO state (neither trainer.json nor the accelerate/ folder of older versions): the "
                "checkpoint is incomplete or was written by another algorithm"
            )
        self._dirty = False  # every process loaded the same weights

    def _load_current(self, path: Path) -> None:
        from .state_files import load_tree, set_rng_state, tree_exists

        trainer = load_tree(path, "trainer")
        try:
            counters, scheduler, had_reference = trainer["counters"], trainer["scheduler"], bool(trainer["reference"])
        except (KeyError, TypeError) as e:
            raise CheckpointError(f"{path / 'trainer.json'} lacks {e}; the checkpoint is damaged") from e
        self._load_weights([policy_dir(path), path / "policy"])
        name = f"optimizer-rank{self._processes.rank}" if self._optimizer_per_rank else "optimizer"
        self._set_optimizer_state(load_tree(path, name), path / f"{name}.json")
        self._set_scheduler_and_counters(scheduler, counters, path / "trainer.json")
        if self.ref_model is not None or self.options.beta > 0:  # type: ignore[attr-defined]
            if had_reference:
                self._load_reference(path / "reference.safetensors")
            else:
                self.context.log(f"{path} has no KL reference (it was written with beta 0): the reference is the loaded policy")
                self._snapshot_reference()
        if tree_exists(path, f"rng-rank{self._processes.rank}"):
            set_rng_state(load_tree(path, f"rng-rank{self._processes.rank}"))
        else:
            self.context.log(
                f"{path} has no random state for process {self._processes.rank} (it was written by {trainer.get('processes')} "
                "process(es)): sampling after the resume differs from an uninterrupted run"
            )

    def _load_legacy(self, path: Path) -> None:
        """A checkpoint of an earlier version: Accelerate's ``save_state`` folder. Each pickle is
        read with torch's restricted unpickler; the RNG files (which need numpy objects) are not
        read, so sampling after this resume is not bit-identical to an uninterrupted run."""
        from .state_files import load_legacy

        acc_dir = path / "accelerate"
        self._load_weights([path / "policy"])
        self._set_optimizer_state(load_legacy(acc_dir / "optimizer.bin"), acc_dir / "optimizer.bin")
        # the old GRPO registered the scheduler, then the counters, for checkpointing
        scheduler = load_legacy(acc_dir / "custom_checkpoint_0.pkl")
        counters = load_legacy(acc_dir / "custom_checkpoint_1.pkl")
        self._set_scheduler_and_counters(scheduler, counters, acc_dir / "custom_checkpoint_*.pkl")
        ref_file = path / "reference" / "reference.pt"
        if self.options.beta > 0 and ref_file.exists():  # type: ignore[attr-defined]
            state = load_legacy(ref_file)
            if self.ref_model is None:
                self._snapshot_reference()
            try:
                self.ref_model.load_state_dict(state)
            except (RuntimeError, TypeError, AttributeError) as e:
                raise CheckpointError(f"{ref_file} does not fit the model ({e})") from e
        self.context.log(
            f"{path} was written by an earlier version (accelerate/ folder): its random states are pickles, which "
            "are not loaded, so sampling after this resume differs from an uninterrupted run"
        )

    def _load_weights(self, candidates: list[Path]) -> None:
        folder = next((c for c in candidates if c.is_dir()), None)
        if folder is None:
            raise CheckpointError(f"no policy weights at {' or '.join(str(c) for c in candidates)}: the checkpoint is incomplete")
        self.policy.before_update()
        self.policy.load(folder)
        if self._sharded:  # the policy loaded its full-weight copy; the trained shards follow it
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
            )

            set_model_state_dict(self.model, self.policy.module.state_dict(), options=StateDictOptions(full_state_dict=True))

    def _load_reference(self, file: Path) -> None:
        from safetensors.torch import load_model

        if self.ref_model is None:
            self._snapshot_reference()
        if not file.is_file():
            raise CheckpointError(f"{file} is missing: the checkpoint is incomplete (it was written with a KL reference)")
        try:
            load_model(self.ref_model, str(file), strict=True, device=str(self.accelerator.device))
        except Exception as e:  # safetensors' own error types for a bad header; RuntimeError for wrong keys
            raise CheckpointError(f"{file} cannot be loaded into the reference model ({type(e).__name__}: {e})") from e

    @property
    def _optimizer_per_rank(self) -> bool:
        from accelerate.utils import DistributedType

        return self.accelerator.distributed_type == DistributedType.DEEPSPEED

    def _optimizer_state(self) -> Any:
        """The optimiser's state as plain data. Under FSDP the full state, gathered with torch's
        distributed state-dict API (every process must call this)."""
        if self._sharded:
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_optimizer_state_dict,
            )

            return get_optimizer_state_dict(
                self.model, self.optimizer.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
        return self.optimizer.state_dict()

    def _set_optimizer_state(self, state: Any, file: Path) -> None:
        try:
            if self._sharded:
                from torch.distributed.checkpoint.state_dict import (
                    StateDictOptions,
                    set_optimizer_state_dict,
                )

                set_optimizer_state_dict(
                    self.model, self.optimizer.optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True)
                )
            else:
                self.optimizer.load_state_dict(state)
        except (ValueError, KeyError, TypeError, RuntimeError, IndexError) as e:
            raise CheckpointError(f"the optimiser state in {file} does not fit this model ({type(e).__name__}: {e})") from e

    def _set_scheduler_and_counters(self, scheduler: Any, counters: Any, file: Path) -> None:
        expected = self.scheduler.state_dict()
        if not isinstance(scheduler, dict) or set(scheduler) - set(expected):
            raise CheckpointError(f"the LR scheduler state in {file} is not one this algorithm wrote; the checkpoint is damaged")
        try:
            self.scheduler.load_state_dict(scheduler)
            self.counters.load_state_dict(counters)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"the scheduler or step counters in {file} are damaged ({type(e).__name__}: {e})") from e
