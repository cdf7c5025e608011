"""The options of the LiteLLM teacher: the model and how to reach it, retries, the budget.

An API key is never an option: ``api_key_env`` names the environment variable that holds it,
so run configs (which are copied into every run folder) never contain a secret.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coevolve_sdk import TeacherOptions

__all__ = ["LiteLLMTeacherOptions", "TeacherBudget"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TeacherBudget(BaseModel):
    """Limits for one teacher instance over the whole run; ``None`` means unlimited."""

    model_config = ConfigDict(extra="forbid")

    max_calls: int | None = Field(None, ge=0, description="Requests sent to the model, retries included.")
    max_tokens: int | None = Field(None, ge=0, description="Prompt plus completion tokens.")
    max_cost_usd: float | None = Field(None, ge=0.0, description="US dollars, from litellm's price table or the cost options.")


class LiteLLMTeacherOptions(TeacherOptions):
    model: str = Field("dashscope/qwen3-max", description="Any litellm model string, e.g. openai/gpt-4o-mini, hosted_vllm/Qwen/Qwen3-8B, ollama/qwen3.")
    api_base: str | None = Field(None, description="Server URL for self-hosted models (vLLM, Ollama) or proxies.")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the API key (never the key itself). Unset: litellm's provider default (e.g. DASHSCOPE_API_KEY, OPENAI_API_KEY).")
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(2048, ge=1, description="Completion tokens per request.")
    timeout: float = Field(120.0, gt=0, description="Seconds per request.")
    retries: int = Field(4, ge=0, description="Retries after a rate limit, timeout, connection error or 5xx.")
    backoff_s: float = Field(1.0, ge=0.0, description="First retry delay; doubles each retry (with jitter).")
    backoff_max_s: float = Field(60.0, ge=0.0)
    concurrency: int = Field(8, ge=1, description="Requests in flight at once, over all threads using this teacher.")
    budget: TeacherBudget = Field(default_factory=TeacherBudget)
    input_cost_per_token: float | None = Field(None, ge=0.0, description="Price override (USD) for models litellm has no price for.")
    output_cost_per_token: float | None = Field(None, ge=0.0)
    prompt_version: str = Field("v1", pattern=r"^[A-Za-z0-9_.-]+$", description="Suffix of the template files; recorded in each task's lineage.")
    prompt_dir: str | None = Field(None, description="Folder searched for templates before the package's own.")
    use_judge: bool = Field(False, description="Answer judge() with the strict LLM judge; off: judge() abstains.")
    history_steps: int = Field(10, ge=1, description="Recent steps of the round shown to the model when exploring.")
    max_observation_chars: int = Field(1500, ge=100, description="Observations are cut to this length in prompts.")
    max_consecutive_bad_replies: int = Field(2, ge=1, description="An exploration round ends after this many replies in a row without a usable action.")
    completion_kwargs: dict[str, Any] = Field(default_factory=dict, description="Passed as is to litellm.completion (e.g. extra_body, top_p).")

    @field_validator("api_key_env")
    @classmethod
    def _is_a_variable_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError("api_key_env must be the NAME of an environment variable (e.g. DASHSCOPE_API_KEY), not a key")
        return v

    @field_validator("completion_kwargs")
    @classmethod
    def _no_secrets_or_overrides(cls, v: dict[str, Any]) -> dict[str, Any]:
        banned = {"api_key", "model", "messages"} & set(v)
        if banned:
            raise ValueError(f"completion_kwargs may not set {sorted(banned)}; use the dedicated options (api_key_env, model)")
        return v
