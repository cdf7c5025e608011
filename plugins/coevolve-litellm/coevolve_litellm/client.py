"""The one request path to the model: ``litellm.completion`` with retries, a bound and a budget.

Every stage of the teacher asks through :meth:`LiteLLMClient.complete`. Requests are retried
with exponential backoff (with jitter) on rate limits, timeouts, connection errors and 5xx; a
thread-safe semaphore bounds the requests in flight, since the evolution stage calls one teacher
from several worker threads; and a budget in calls, tokens and US dollars is checked *before*
each request, raising ``coevolve_sdk.errors.BudgetExhausted`` when it no longer allows one.
Usage is counted on the client (``spent``) and in the evolution stage's per-signal meter.

There is one path, synchronous: the evolution stage runs signals in threads, and exploration
has to step the environment between requests anyway, so an async twin would only double the
code to test.

litellm is imported on first use, never at module import, so that registering the plugin (at
every ``import coevolve_sdk``) stays fast.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from typing import Any, Callable

from coevolve_sdk import (
    BudgetExhausted,
    CoEvolveError,
    ConfigError,
    TeacherUsage,
    format_tool_call,
    record_usage,
)

from .options import LiteLLMTeacherOptions, TeacherBudget
from .prompts import clip

__all__ = ["LiteLLMClient", "TeacherCallError"]

_LITELLM: Any = None
_LITELLM_LOCK = threading.Lock()
_RETRYABLE = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError")


def _litellm() -> Any:
    """Import litellm on first use, without its network fetch of the price table."""
    global _LITELLM
    if _LITELLM is None:
        with _LITELLM_LOCK:
            if _LITELLM is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                try:
                    import litellm
                except ImportError as e:
                    raise ConfigError(
                        "the litellm teacher needs the litellm package: pip install ./plugins/coevolve-litellm "
                        "(it depends on litellm), or pip install 'litellm>=1.60'"
                    ) from e
                litellm.suppress_debug_info = True  # no "Give Feedback" banners in our logs
                _LITELLM = litellm
    return _LITELLM


def _retryable(litellm: Any) -> tuple[type[BaseException], ...]:
    return tuple(getattr(litellm, n) for n in _RETRYABLE if isinstance(getattr(litellm, n, None), type))


class TeacherCallError(CoEvolveError):
    """A request that failed for good: retries exhausted, or an error retrying cannot fix
    (authentication, bad request). Raised by ``LiteLLMClient.complete``; the stages catch it
    and count a failure, so it never reaches the evolution stage from them."""


class LiteLLMClient:
    """Chat completions for one teacher, shared by all the threads that use it.

    ``on_failure(stage, reason)`` is told about a request refused by the budget before
    ``BudgetExhausted`` is raised, so the teacher's failure log names it like any other.
    ``sleep`` waits out a backoff delay; tests replace it to record the delays instead.
    """

    def __init__(
        self,
        options: LiteLLMTeacherOptions,
        *,
        name: str = "litellm",
        seed: int = 0,
        on_failure: Callable[[str, str], None] | None = None,
    ) -> None:
        self.options = options
        self.name = name
        self.on_failure = on_failure
        self.sleep: Callable[[float], None] = time.sleep
        self.spent = TeacherUsage()
        self._calls_reserved = 0
        self._sem = threading.BoundedSemaphore(options.concurrency)
        self._lock = threading.Lock()
        self._rng = random.Random(seed)

    # ------------------------------------------------------------------ budget
    def _reserve(self, stage: str) -> None:
        """Claim one request from the budget, or raise BudgetExhausted."""
        b = self.options.budget
        with self._lock:
            over: tuple[str, float, float] | None = None
            tokens = self.spent.prompt_tokens + self.spent.completion_tokens
            if b.max_calls is not None and self._calls_reserved >= b.max_calls:
                over = ("calls", b.max_calls, self._calls_reserved)
            elif b.max_tokens is not None and tokens >= b.max_tokens:
                over = ("tokens", b.max_tokens, tokens)
            elif b.max_cost_usd is not None and self.spent.cost_usd >= b.max_cost_usd:
                over = ("cost_usd", b.max_cost_usd, self.spent.cost_usd)
            if over is None:
                self._calls_reserved += 1
                return
        exc = BudgetExhausted(*over)
        if self.on_failure is not None:
            self.on_failure(stage, str(exc))
        raise exc

    def reset_budget(self, budget: TeacherBudget | None = None) -> None:
        """Start counting the budget afresh (optionally with new limits); failures are kept."""
        with self._lock:
            if budget is not None:
                self.options.budget = budget
            self._calls_reserved = 0
            self.spent = TeacherUsage(failures=self.spent.failures)

    def budget_left(self) -> dict[str, float | None]:
        """What remains of each limit (``None``: unlimited)."""
        b = self.options.budget
        with self._lock:
            tokens = self.spent.prompt_tokens + self.spent.completion_tokens
            return {
                "calls": None if b.max_calls is None else max(0, b.max_calls - self._calls_reserved),
                "tokens": None if b.max_tokens is None else max(0, b.max_tokens - tokens),
                "cost_usd": None if b.max_cost_usd is None else max(0.0, b.max_cost_usd - self.spent.cost_usd),
            }

    def account(self, usage: TeacherUsage) -> None:
        """Add ``usage`` to ``spent`` and to the caller's usage meter (the signal being processed)."""
        with self._lock:
            self.spent.add(usage)
        record_usage(usage)

    # ------------------------------------------------------------------ requests
    def _cost(self, litellm: Any, resp: Any, prompt_tokens: int, completion_tokens: int) -> float:
        o = self.options
        if o.input_cost_per_token is not None or o.output_cost_per_token is not None:
            return prompt_tokens * (o.input_cost_per_token or 0.0) + completion_tokens * (o.output_cost_per_token or 0.0)
        try:  # litellm's public price lookup, from the response's model and token counts
            return float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # unknown model or provider: litellm has no price for it
            return 0.0

    def _request(self, stage: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        o = self.options
        kw: dict[str, Any] = {
            "model": o.model,
            "messages": messages,
            "temperature": o.temperature,
            "max_tokens": o.max_tokens,
            "timeout": o.timeout,
            "max_retries": 0,  # we retry ourselves, with backoff and budget checks in between
            "drop_params": True,
        }
        if o.api_base:
            kw["api_base"] = o.api_base
        if o.api_key_env:
            key = os.environ.get(o.api_key_env)
            if not key:
                raise TeacherCallError(f"environment variable {o.api_key_env} (api_key_env) is not set")
            kw["api_key"] = key
        kw.update(o.completion_kwargs)
        # Which stage asked: visible to litellm callbacks, proxies and custom providers.
        kw["metadata"] = {**(o.completion_kwargs.get("metadata") or {}), "coevolve_stage": stage, "coevolve_teacher": self.name}
        return kw

    @staticmethod
    def _reply_text(resp: Any) -> str:
        try:
            msg = resp.choices[0].message
        except (AttributeError, IndexError, TypeError):
            return ""
        content = getattr(msg, "content", None) or ""
        if not content.strip():
            # A model that answered with native tool calls: render them in the text format.
            calls = getattr(msg, "tool_calls", None) or []
            parts = []
            for c in calls:
                try:
                    args = json.loads(c.function.arguments or "{}")
                    if isinstance(args, dict):
                        parts.append(format_tool_call(c.function.name, args))
                except (AttributeError, TypeError, ValueError):
                    continue
            if parts:
                content = "<action>\n" + "\n".join(parts) + "\n</action>"
        return content

    def _delay(self, attempt: int) -> float:
        base = min(self.options.backoff_max_s, self.options.backoff_s * (2**attempt))
        return base * (0.5 + 0.5 * self._rng.random())

    def complete(self, stage: str, messages: list[dict[str, str]]) -> str:
        """One chat completion with retries, budget and usage accounting; returns the reply text.

        Raises BudgetExhausted, or TeacherCallError when the request failed for good.
        """
        litellm = _litellm()
        retryable = _retryable(litellm)
        kw = self._request(stage, messages)
        for attempt in range(self.options.retries + 1):
            self._reserve(stage)
            try:
                with self._sem:
                    resp = litellm.completion(**kw)
            except retryable as e:
                self.account(TeacherUsage(calls=1))
                if attempt >= self.options.retries:
                    raise TeacherCallError(f"{type(e).__name__} after {attempt + 1} attempts: {clip(e, 300)}") from None
                self.sleep(self._delay(attempt))
                continue
            except Exception as e:  # authentication, bad request, context window...: retrying will not help
                self.account(TeacherUsage(calls=1))
                raise TeacherCallError(f"{type(e).__name__}: {clip(e, 300)}") from None
            usage = getattr(resp, "usage", None)
            pt = int(getattr(usage, "prompt_tokens", 0) or 0)
            ct = int(getattr(usage, "completion_tokens", 0) or 0)
            self.account(TeacherUsage(calls=1, prompt_tokens=pt, completion_tokens=ct, cost_usd=self._cost(litellm, resp, pt, ct)))
            return self._reply_text(resp)
        raise TeacherCallError("no attempt was made")  # pragma: no cover - the loop always returns or raises
