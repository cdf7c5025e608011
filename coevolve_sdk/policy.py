"""Policy: the rollout engine that turns token ids into sampled token ids and logprobs.

The rollout loop is token-in/token-out: it asks the policy to render the opening messages once,
then appends the sampled tokens and the rendered observations, and never re-tokenises the
history. That keeps the logprobs used by the trainer exactly those of the tokens it trains on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from .components import Component, ComponentOptions

__all__ = ["Policy", "PolicyOptions", "Generation"]


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
        """Called on every process right before each optimisation step (after the step's
        rollouts). A rollout engine that holds memory the update needs (vLLM's KV cache, say)
        can release it here."""
        return None

    def after_update(self) -> dict[str, float]:
        """Called on every process right after each optimisation step. A rollout engine that
        keeps its own copy of the weights (vLLM) syncs them here and returns metrics."""
        return {}

    def texts_for_tokenizer(self, texts: list[str]) -> None:
        """Hook for policies that build their tokenizer from the environment's own texts."""


class GenerationSettings(BaseModel):
    """How the rollout loop samples: passed through config to ``Policy.generate``."""

    model_config = ConfigDict(extra="forbid")
    max_new_tokens: int = Field(96, ge=1)
    temperature: float = Field(0.9, ge=0.0)
