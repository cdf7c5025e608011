"""Policy: the rollout engine that turns token ids into sampled token ids and logprobs.

The rollout loop is token-in/token-out: it asks the policy to render the opening messages once,
then appends the sampled tokens and the rendered observations, and never re-tokenises the
history. That keeps the logprobs used by the trainer exactly those of the tokens it trains on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from coevolve_sdk.components.base import Component, ComponentOptions

__all__ = ["Policy", "PolicyOptions", "Generation", "TrainablePolicy"]


class PolicyOptions(ComponentOptions):
    pass


class Generation(BaseModel):
    """One sampled completion.

    ``token_ids`` are the new tokens only, including the end-of-turn token when the model
    produced it (``finished``); ``logprobs`` are the sampling policy's log-probabilities of
    those tokens computed from raw logits (before temperature or top-k), one per token.
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finished: bool = True


class Policy(Component, ABC):
    """What the rollout loop needs from a model.

    An implementer provides rendering (``encode_prompt``, ``encode_followup``), batched
    sampling (``generate``) and persistence. The loop guarantees that ``encode_followup`` is
    only called right after a completion that ended with ``eos_token_id`` (it appends that
    token itself when a completion was cut off by the length limit).
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = PolicyOptions

    eos_token_id: int
    max_context: int = 4096

    @abstractmethod
    def encode_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        """Token ids of the opening messages, ending with the assistant generation prompt."""

    @abstractmethod
    def encode_followup(self, messages: list[dict[str, Any]]) -> list[int]:
        """Token ids for environment messages appended after the agent's turn, ending with the
        assistant generation prompt, so that ``prompt + completion + followup`` equals what the
        chat template would render for the whole conversation."""

    @abstractmethod
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
    ) -> list[Generation]:
        """Sample one completion per prompt."""

    @abstractmethod
    def decode(self, token_ids: list[int]) -> str:
        """Text of ``token_ids`` without special tokens stripped (the environment parses it)."""

    def save(self, path: Path) -> None:
        """Write weights and tokenizer so that the policy can be reopened from ``path``."""

    def load(self, path: Path) -> None:
        """Restore what ``save`` wrote."""

    def before_update(self) -> None:
        """Called right before the weights change: by the loop on every process before each
        optimisation step (after the step's rollouts), and by an algorithm before it changes
        the weights on its own (a warm start, loading a checkpoint, adopting the main process's
        weights). A rollout engine that keeps its own copy of the weights learns here that the
        copy is about to go stale, and one that holds memory the update needs (vLLM's KV cache,
        say) can release it. It must not communicate with other processes: an algorithm may
        call it on one process alone (the warm start runs on the main process only)."""
        return None

    def after_update(self) -> dict[str, float]:
        """Called on every process right after each optimisation step. A rollout engine that
        keeps its own copy of the weights (vLLM) syncs them here and returns metrics."""
        return {}



class TrainablePolicy(Policy):
    """A policy whose weights an algorithm trains in place: the trainer <-> rollout seam.

    A trainer (``coevolve-grpo``'s GRPO, say) reaches the model only through these members, so
    any rollout engine built on a trainable torch model (the ``hf`` and ``tiny`` policies,
    vLLM's) works with any trainer, and neither side touches the other's internals:

    * ``module``: the ``torch.nn.Module`` holding the full weights. The algorithm trains it
      (and may wrap it for distributed training, e.g. DDP, whose wrapper shares its parameters).
    * ``set_decoding_module(m)``: from now on decoding, ``module`` and ``save`` use ``m``. An
      algorithm calls it when the module it trains is not one decoding can run through: under
      FSDP the trained parameters are shards, so it hands over a full-weight copy that it
      refreshes after every step; under DDP it hands back the unwrapped module.
    * ``pad_token_id`` and ``encode_completion``: what batching and the supervised warm start
      need beyond the rollout encodings.
    * ``save(path, state_dict)`` / ``load(path)``: weights as tensors only (no pickle), so a
      checkpoint copied from someone else cannot run code when loaded. ``state_dict`` is passed
      by a trainer whose module is sharded (it gathers the full weights first); ``load`` copies
      the weights into the existing module, so wrappers that share its parameters stay valid.

    Phases: ``before_update()`` comes before every change of the weights (the loop calls it
    around ``Algorithm.step``; the algorithm itself around a warm start or a load) and
    ``after_update()`` after each optimisation step. A policy that keeps its own copy of the
    weights (vLLM) treats the copy as stale from ``before_update`` or ``load`` until it syncs.

    Everything here is torch-free at import: ``Any`` stands for torch types.
    """

    @property
    @abstractmethod
    def module(self) -> Any:
        """The ``torch.nn.Module`` with the policy's full weights (the one decoding runs through)."""

    @abstractmethod
    def set_decoding_module(self, module: Any) -> None:
        """Decode (and save) through ``module`` from now on; it must hold the full weights."""

    @property
    @abstractmethod
    def pad_token_id(self) -> int:
        """Token id used to pad batches (never trained on: its loss weight is zero)."""

    @abstractmethod
    def encode_completion(self, text: str) -> list[int]:
        """Token ids of an assistant turn's ``text`` followed by its end-of-turn token, as the
        policy would have sampled them (the warm start trains on these)."""

    @abstractmethod
    def save(self, path: Path, state_dict: Mapping[str, Any] | None = None) -> None:  # type: ignore[override]
        """Write the weights (``state_dict`` if given, else the module's) as safetensors, with
        what reopening needs (config, tokenizer), into the folder ``path``."""

    @abstractmethod
    def load(self, path: Path) -> None:
        """Copy the weights ``save`` wrote into the existing module. Reads tensors and JSON
        only; a missing, damaged or mismatched file raises an error that names it."""
