"""The LLM teacher: reflection, signal-guided re-exploration and task abstraction through litellm.

``LiteLLMTeacher`` speaks to any model string litellm accepts (``dashscope/qwen3-max`` as in
the paper, an OpenAI model, ``hosted_vllm/...`` or ``ollama/...`` servers). For each signal:

1. **reflect** — the signalled trajectory goes to the model, which answers with a JSON object
   parsed strictly into ``coevolve_sdk.types.ExplorationContext``;
2. **explore** — several independent rounds of several steps in a fresh instance of the real
   environment; at each step the model sees the guidance template of the signal's kind, the
   context, the tools, the task's opening messages and the round's history, and proposes one
   action, which the environment executes (a ``coevolve_sdk.types.Triplet`` per step);
3. **abstract** — the exploration runs go to the model, which answers with a JSON list of
   candidate tasks (query, reference actions, completion criterion);
4. **judge** (optional) — the strict judge of the paper, answering ``Success: true/false``.

Robustness is the point of this module. Requests are retried with exponential backoff on rate
limits, timeouts, connection errors and 5xx; a thread-safe semaphore bounds the requests in
flight; a budget in calls, tokens and dollars raises
``coevolve_sdk.errors.BudgetExhausted`` when spent, and that is the only exception the
stages let out. Every other failure (a request that kept failing, a malformed or empty reply,
an environment that raised) is counted in ``failures`` and in the usage meter, and the stage
returns what it has (an empty list, or a context built from the trajectory alone).

litellm is imported on first use, never at module import, so ``import coevolve_sdk`` stays fast
and works without the ``llm`` extra installed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import threading
import time
import weakref
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Awaitable, Callable, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .actions import MAX_ACTION_CHARS, format_tool_call
from .context import RunContext
from .environment import AgentEnv
from .errors import BudgetExhausted, CoEvolveError, ConfigError
from .teacher import Teacher, TeacherOptions, record_usage
from .types import CandidateTask, ExplorationContext, Signal, Task, TeacherUsage, Trajectory, Triplet

__all__ = [
    "LiteLLMTeacher",
    "LiteLLMTeacherOptions",
    "TeacherBudget",
    "ReplyParseError",
    "TeacherCallError",
    "PromptSet",
    "extract_json",
    "extract_action",
    "parse_judgement",
    "DEFAULT_ACTION_FORMAT",
]

#: How actions look unless the environment says otherwise (``action_format`` attribute).
DEFAULT_ACTION_FORMAT = (
    "Call one tool per action, as a JSON object inside tool_call tags:\n"
    '<tool_call>{"name": "<tool name>", "arguments": {"<argument>": <value>}}</tool_call>\n'
    "To call several tools in one action, write several such blocks one after another."
)

MAX_REPLY_CHARS = 200_000
_MAX_DECODE_ATTEMPTS = 500
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)
_SUCCESS = re.compile(r"^[\s>*_#-]*success[\s*_]*:[\s*_\[]*(true|false)\b", re.IGNORECASE | re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---------------------------------------------------------------------------------- parsing
class ReplyParseError(ValueError):
    """The model's reply could not be read as what the stage asked for. The message says why."""


def _strip_reasoning(text: str) -> str:
    """Drop ``<think>`` blocks (Qwen3 and other reasoning models emit them before the answer)."""
    return _THINK.sub("", text)


def _reply_body(text: Any) -> str:
    """The reply without its reasoning block; ReplyParseError when it is not text or empty."""
    if not isinstance(text, str):
        raise ReplyParseError(f"reply is {type(text).__name__}, not text")
    body = _strip_reasoning(text)
    if not body.strip():
        raise ReplyParseError("reply is empty")
    return body


def extract_json(text: Any, expect: type | tuple[type, ...] = dict) -> Any:
    """The first JSON value of type ``expect`` found in a model reply.

    Looks in fenced code blocks first, then anywhere in the text (models often wrap the JSON in
    prose). Never evaluates anything. The work is bounded (at most 500 decode attempts, replies up
    to ``MAX_REPLY_CHARS``), so a hostile reply costs little. Raises ``ReplyParseError`` (and nothing else) when the
    reply is not a string, is empty, is too long or holds no such JSON value.
    """
    if isinstance(text, str) and len(text) > MAX_REPLY_CHARS:
        raise ReplyParseError(f"reply is {len(text)} characters long; the limit is {MAX_REPLY_CHARS}")
    body = _reply_body(text).strip()
    want = expect if isinstance(expect, tuple) else (expect,)
    opener = "{["  # both, so that a reply holding the wrong kind of JSON gets a precise message
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(body)] + [body]
    found_other: str | None = None
    attempts = 0
    for chunk in candidates:
        pos = 0
        while attempts < _MAX_DECODE_ATTEMPTS:
            idx = min((i for i in (chunk.find(c, pos) for c in opener) if i >= 0), default=-1)
            if idx < 0:
                break
            attempts += 1
            try:
                value, _ = decoder.raw_decode(chunk, idx)
            except (ValueError, RecursionError):
                pos = idx + 1
                continue
            if isinstance(value, want):
                return value
            found_other = type(value).__name__
            pos = idx + 1
    names = " or ".join("object" if t is dict else "array" if t is list else t.__name__ for t in want)
    if found_other:
        raise ReplyParseError(f"reply holds JSON, but no JSON {names} (found a {found_other})")
    raise ReplyParseError(f"reply holds no JSON {names}")


def extract_action(text: Any) -> str:
    """The action in an exploration reply: the last ``<action>...</action>`` block, or else the
    ``<tool_call>`` blocks written outside any tags. Raises ``ReplyParseError``."""
    body = _reply_body(text)
    blocks = _ACTION.findall(body)
    if blocks:
        action = blocks[-1].strip()
    else:
        calls = _TOOL_CALL_BLOCK.findall(body)
        if not calls:
            raise ReplyParseError("reply has no <action>...</action> block")
        action = "\n".join(c.strip() for c in calls)
    if not action:
        raise ReplyParseError("the <action> block is empty")
    if len(action) > MAX_ACTION_CHARS:
        raise ReplyParseError(f"action is {len(action)} characters long; the limit is {MAX_ACTION_CHARS}")
    return action


def parse_judgement(text: Any) -> bool:
    """``True``/``False`` from a judge reply holding a ``Success: true|false`` line."""
    body = _reply_body(text)
    m = _SUCCESS.search(body)
    if m is None:
        raise ReplyParseError("reply has no 'Success: true' or 'Success: false' line")
    return m.group(1).lower() == "true"


class _ReflectionReply(BaseModel):
    """The reflection JSON. Unknown keys are ignored (models add their own); known keys are typed."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(min_length=1)
    failure_cause: str = ""
    instability_pattern: str = ""
    focus_pattern: list[str] = Field(default_factory=list)
    exploration_objectives: list[str] = Field(default_factory=list)
    do_not_repeat: list[str] = Field(default_factory=list)
    focus_tools: list[str] = Field(default_factory=list)

    @field_validator("summary")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("summary is blank")
        return v.strip()

    @field_validator("failure_cause", "instability_pattern", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("focus_pattern", "exploration_objectives", "do_not_repeat", "focus_tools", mode="before")
    @classmethod
    def _one_is_a_list(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v


class _TaskReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    description: str = ""
    query: str = Field(min_length=1)
    reference_actions: list[str]
    completion_criterion: str = ""

    @field_validator("reference_actions", mode="before")
    @classmethod
    def _actions_as_text(cls, v: Any) -> Any:
        # Models sometimes write a tool call as an object instead of the action text: accept
        # {"name", "arguments"} objects and render them in the canonical <tool_call> form.
        if not isinstance(v, list):
            return v
        out = []
        for a in v:
            if isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("arguments", {}), dict):
                out.append(format_tool_call(a["name"], a.get("arguments", {})))
            else:
                out.append(a)
        return out


# ---------------------------------------------------------------------------------- prompts
_PACKAGE_PROMPTS = "prompts"


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str
    sha: str

    def render(self, **values: str) -> list[dict[str, str]]:
        msgs = []
        if self.system.strip():
            msgs.append({"role": "system", "content": _fill(self.system, values, self.name)})
        msgs.append({"role": "user", "content": _fill(self.user, values, self.name)})
        return msgs


def _fill(template: str, values: dict[str, str], name: str) -> str:
    """Substitute ``{{key}}`` in one pass: inserted text is never scanned again."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise ConfigError(f"prompt template '{name}' uses {{{{{key}}}}}, which the teacher does not provide")
        return str(values[key])

    return _PLACEHOLDER.sub(sub, template)


class PromptSet:
    """The templates of one ``prompt_version``, from a user folder first, then the package.

    Files are ``<stage>-<version>.md``. ``reflect``, ``explore``, ``abstract`` and ``judge`` hold a
    ``<!-- system -->`` part and a ``<!-- user -->`` part; ``guidance-<kind>`` is one block.
    """

    STAGES: ClassVar[dict[str, set[str]]] = {
        "reflect": {"signal_kind", "signal_reason", "signal_evidence", "task_query", "trajectory", "outcome"},
        "explore": {"action_format", "guidance", "opening", "tools", "history"},
        "abstract": {"min_actions", "max_actions", "max_candidates", "action_format", "signal_kind", "context", "task_query", "tools", "runs"},
        "judge": {"description", "query", "modality", "reference", "trajectory", "final_observation"},
    }

    def __init__(self, version: str, prompt_dir: str | Path | None = None) -> None:
        self.version = version
        self.prompt_dir = Path(prompt_dir) if prompt_dir else None
        if self.prompt_dir is not None and not self.prompt_dir.is_dir():
            raise ConfigError(f"prompt_dir {self.prompt_dir} is not a folder. Point it at a folder of <stage>-<version>.md files.")
        self._cache: dict[str, Prompt | None] = {}
        self._lock = threading.Lock()
        for stage in self.STAGES:  # fail at construction, not halfway through a run
            self.get(stage)
        self.guidance("generic")

    def _read(self, stem: str) -> str | None:
        fname = f"{stem}-{self.version}.md"
        if self.prompt_dir is not None and (self.prompt_dir / fname).is_file():
            return (self.prompt_dir / fname).read_text(encoding="utf-8")
        res = resources.files("coevolve_sdk").joinpath(_PACKAGE_PROMPTS, fname)
        if res.is_file():
            return res.read_text(encoding="utf-8")
        return None

    def _load(self, stem: str, staged: bool) -> Prompt | None:
        with self._lock:
            if stem in self._cache:
                return self._cache[stem]
            text = self._read(stem)
            prompt = None
            if text is not None:
                sha = hashlib.sha256(text.encode()).hexdigest()[:12]
                if staged:
                    if "<!-- user -->" not in text:
                        raise ConfigError(f"prompt {stem}-{self.version}.md has no '<!-- user -->' line separating the user part")
                    system, user = text.split("<!-- user -->", 1)
                    system = system.replace("<!-- system -->", "", 1).strip()
                    prompt = Prompt(stem, system, user.strip(), sha)
                    allowed = self.STAGES.get(stem, set())
                    unknown = {m.group(1) for m in _PLACEHOLDER.finditer(text)} - allowed
                    if unknown:
                        raise ConfigError(
                            f"prompt {stem}-{self.version}.md uses unknown placeholders {sorted(unknown)}; allowed: {sorted(allowed)}"
                        )
                else:
                    unknown = {m.group(1) for m in _PLACEHOLDER.finditer(text)} - {"context", "signal_kind"}
                    if unknown:
                        raise ConfigError(f"guidance {stem}-{self.version}.md uses unknown placeholders {sorted(unknown)}; allowed: context, signal_kind")
                    prompt = Prompt(stem, "", text.strip(), sha)
            self._cache[stem] = prompt
            return prompt

    def get(self, stage: str) -> Prompt:
        p = self._load(stage, staged=True)
        if p is None:
            where = f"{self.prompt_dir} or " if self.prompt_dir else ""
            raise ConfigError(f"no prompt template {stage}-{self.version}.md in {where}the package's prompts folder")
        return p

    def guidance(self, kind: str) -> Prompt:
        """The guidance template for a signal kind; ``guidance-generic`` for kinds without one."""
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", kind)
        p = self._load(f"guidance-{safe}", staged=False)
        if p is None:
            p = self._load("guidance-generic", staged=False)
        if p is None:
            raise ConfigError(f"no guidance template guidance-generic-{self.version}.md; it is required as the fallback")
        return p


# ---------------------------------------------------------------------------------- options
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


# ---------------------------------------------------------------------------------- litellm
_LITELLM: Any = None
_LITELLM_LOCK = threading.Lock()


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
                    raise ConfigError("the litellm teacher needs litellm: pip install 'coevolve-sdk[llm]'") from e
                litellm.suppress_debug_info = True  # no "Give Feedback" banners in our logs
                _LITELLM = litellm
    return _LITELLM


def _retryable(litellm: Any) -> tuple[type[BaseException], ...]:
    names = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError")
    return tuple(getattr(litellm, n) for n in names if isinstance(getattr(litellm, n, None), type))


class TeacherCallError(CoEvolveError):
    """A request that failed for good: retries exhausted, or an error retrying cannot fix
    (authentication, bad request). Raised by ``LiteLLMTeacher.complete``; the stages catch
    it and count a failure, so it never reaches the evolution stage from them."""


def _clip(text: Any, n: int) -> str:
    s = str(text)
    return s if len(s) <= n else s[: n - 20] + f" ...[{len(s) - n + 20} more chars]"


# ---------------------------------------------------------------------------------- teacher
class LiteLLMTeacher(Teacher):
    """A teacher backed by any LLM that litellm can reach.

    Thread-safe: the evolution stage may call one instance from several worker threads at once.
    Counters (``spent``), ``failures`` and the budget are shared by those threads; the
    semaphore bounds the requests in flight to ``options.concurrency``.

    ``failures`` lists a reason for every stage that failed (``"reflect: reply holds no JSON
    object"``) and ``last_error`` holds the newest one; ``dropped`` lists candidates discarded
    before validation (too few actions, duplicates) with the reason. Budget exhaustion is counted there too,
    and raised as ``coevolve_sdk.errors.BudgetExhausted``.
    """

    name = "litellm"
    Options = LiteLLMTeacherOptions
    prompt_version = "v1"

    def __init__(self, options: LiteLLMTeacherOptions | None = None, context: RunContext | None = None) -> None:
        super().__init__(options, context)
        o: LiteLLMTeacherOptions = self.options  # type: ignore[assignment]
        self.o = o
        self.prompt_version = o.prompt_version  # type: ignore[misc]
        self.prompts = PromptSet(o.prompt_version, o.prompt_dir)
        if o.api_key_env is not None and not os.environ.get(o.api_key_env):
            raise ConfigError(f"teacher option api_key_env names {o.api_key_env}, but that environment variable is not set. Export it before the run.")
        self._sem = threading.BoundedSemaphore(o.concurrency)
        self._async_sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._rng = random.Random(context.seed if context is not None else 0)
        self.spent = TeacherUsage()
        self._calls_reserved = 0
        self.failures: list[str] = []
        self.dropped: list[str] = []
        self.last_error: str | None = None
        # Backoff sleeps; replaceable (tests record the delays instead of waiting them out).
        self.sleep: Callable[[float], None] = time.sleep
        self.asleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    # ------------------------------------------------------------------ bookkeeping
    def _fail(self, stage: str, reason: str) -> None:
        msg = f"{stage}: {reason}"
        with self._lock:
            self.failures.append(msg)
            self.last_error = msg
            self.spent.failures += 1
        record_usage(TeacherUsage(failures=1))
        if self.context is not None:
            try:
                self.context.log(f"[teacher {self.name}] {_clip(msg, 300)}")
            except Exception:
                pass

    def _reserve(self, stage: str) -> None:
        """Claim one request from the budget, or raise BudgetExhausted (counted)."""
        b = self.o.budget
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
        self._fail(stage, str(exc))
        raise exc

    def reset_budget(self, budget: TeacherBudget | None = None) -> None:
        """Start counting the budget afresh (optionally with new limits); usage totals are kept."""
        with self._lock:
            if budget is not None:
                self.o.budget = budget
            self._calls_reserved = 0
            self.spent = TeacherUsage(failures=self.spent.failures)

    def budget_left(self) -> dict[str, float | None]:
        """What remains of each limit (``None``: unlimited)."""
        b = self.o.budget
        with self._lock:
            tokens = self.spent.prompt_tokens + self.spent.completion_tokens
            return {
                "calls": None if b.max_calls is None else max(0, b.max_calls - self._calls_reserved),
                "tokens": None if b.max_tokens is None else max(0, b.max_tokens - tokens),
                "cost_usd": None if b.max_cost_usd is None else max(0.0, b.max_cost_usd - self.spent.cost_usd),
            }

    def _account(self, usage: TeacherUsage) -> None:
        with self._lock:
            self.spent.add(usage)
        record_usage(usage)

    def _cost(self, litellm: Any, resp: Any, prompt_tokens: int, completion_tokens: int) -> float:
        o = self.o
        if o.input_cost_per_token is not None or o.output_cost_per_token is not None:
            return prompt_tokens * (o.input_cost_per_token or 0.0) + completion_tokens * (o.output_cost_per_token or 0.0)
        try:
            hidden = getattr(resp, "_hidden_params", None) or {}
            cost = hidden.get("response_cost")
            if cost is None:
                cost = litellm.completion_cost(completion_response=resp)
            return float(cost or 0.0)
        except Exception:  # unknown model or provider: litellm has no price for it
            return 0.0

    def _request(self, stage: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        o = self.o
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

    def _reply_text(self, litellm: Any, resp: Any) -> str:
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

    def _after_response(self, litellm: Any, resp: Any) -> str:
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        self._account(TeacherUsage(calls=1, prompt_tokens=pt, completion_tokens=ct, cost_usd=self._cost(litellm, resp, pt, ct)))
        return self._reply_text(litellm, resp)

    def _delay(self, attempt: int) -> float:
        base = min(self.o.backoff_max_s, self.o.backoff_s * (2**attempt))
        return base * (0.5 + 0.5 * self._rng.random())

    def complete(self, stage: str, messages: list[dict[str, str]]) -> str:
        """One chat completion with retries, budget and usage accounting; returns the reply text.

        Raises BudgetExhausted, or TeacherCallError when the request failed for good.
        """
        litellm = _litellm()
        retryable = _retryable(litellm)
        kw = self._request(stage, messages)
        for attempt in range(self.o.retries + 1):
            self._reserve(stage)
            try:
                with self._sem:
                    resp = litellm.completion(**kw)
            except retryable as e:
                self._account(TeacherUsage(calls=1))
                if attempt >= self.o.retries:
                    raise TeacherCallError(f"{type(e).__name__} after {attempt + 1} attempts: {_clip(e, 300)}") from None
                self.sleep(self._delay(attempt))
                continue
            except Exception as e:  # authentication, bad request, context window...: retrying will not help
                self._account(TeacherUsage(calls=1))
                raise TeacherCallError(f"{type(e).__name__}: {_clip(e, 300)}") from None
            return self._after_response(litellm, resp)
        raise TeacherCallError("no attempt was made")  # pragma: no cover - the loop always returns or raises

    async def acomplete(self, stage: str, messages: list[dict[str, str]]) -> str:
        """The async twin of ``complete`` (``litellm.acompletion``; one semaphore per event loop)."""
        litellm = _litellm()
        retryable = _retryable(litellm)
        kw = self._request(stage, messages)
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._async_sems.get(loop)
            if sem is None:
                sem = self._async_sems[loop] = asyncio.Semaphore(self.o.concurrency)
        for attempt in range(self.o.retries + 1):
            self._reserve(stage)
            try:
                async with sem:
                    resp = await litellm.acompletion(**kw)
            except retryable as e:
                self._account(TeacherUsage(calls=1))
                if attempt >= self.o.retries:
                    raise TeacherCallError(f"{type(e).__name__} after {attempt + 1} attempts: {_clip(e, 300)}") from None
                await self.asleep(self._delay(attempt))
                continue
            except Exception as e:
                self._account(TeacherUsage(calls=1))
                raise TeacherCallError(f"{type(e).__name__}: {_clip(e, 300)}") from None
            return self._after_response(litellm, resp)
        raise TeacherCallError("no attempt was made")  # pragma: no cover

    # ------------------------------------------------------------------ reflect
    def _reflect_messages(self, signal: Signal, trajectory: Trajectory, task: Task) -> list[dict[str, str]]:
        n = self.o.max_observation_chars
        lines = []
        for i, s in enumerate(trajectory.steps[:40]):
            err = s.info.get("error")
            lines.append(f"Step {i + 1}\nAction: {_clip(s.action, n)}\nObservation: {_clip(s.observation, n)}" + (f"\nError: {_clip(err, 300)}" if err else ""))
        if len(trajectory.steps) > 40:
            lines.append(f"... {len(trajectory.steps) - 40} more steps not shown")
        outcome = f"{'success' if trajectory.success else 'failure'}; score {trajectory.score:.2f}; {len(trajectory.steps)} actions" + (
            "; stopped at the step limit" if trajectory.truncated else ""
        )
        return self.prompts.get("reflect").render(
            signal_kind=signal.kind,
            signal_reason=signal.reason or "(none given)",
            signal_evidence=_clip(json.dumps(signal.evidence, ensure_ascii=False, default=str), 1500),
            task_query=_clip(task.query, 4000),
            trajectory="\n\n".join(lines) or "(the agent took no action)",
            outcome=outcome,
        )

    def _fallback_context(self, signal: Signal, trajectory: Trajectory, task: Task, why: str) -> ExplorationContext:
        tools: list[str] = []
        for s in trajectory.steps:
            for t in s.info.get("tool_names", []):
                if t not in tools:
                    tools.append(t)
        return ExplorationContext(
            signal_kind=signal.kind,
            summary=f"Task: {_clip(task.query, 500)} (the agent {'succeeded' if trajectory.success else 'failed'}, score {trajectory.score:.2f}). Reflection unavailable: {_clip(why, 200)}",
            failure_cause=signal.reason,
            focus_pattern=[trajectory.action_pattern] if trajectory.action_pattern else [],
            focus_tools=tools,
        )

    def _context_from_reply(self, signal: Signal, trajectory: Trajectory, reply: str) -> ExplorationContext:
        data = extract_json(reply, dict)
        try:
            r = _ReflectionReply.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            raise ReplyParseError(f"reflection JSON is invalid at '{'.'.join(map(str, first['loc']))}': {first['msg']}") from None
        tools = r.focus_tools
        if not tools:
            for s in trajectory.steps:
                for t in s.info.get("tool_names", []):
                    if t not in tools:
                        tools.append(t)
        return ExplorationContext(
            signal_kind=signal.kind,
            summary=r.summary,
            failure_cause=r.failure_cause,
            instability_pattern=r.instability_pattern,
            focus_pattern=r.focus_pattern,
            exploration_objectives=r.exploration_objectives,
            do_not_repeat=r.do_not_repeat,
            focus_tools=tools,
        )

    def reflect(self, signal: Signal, trajectory: Trajectory, task: Task) -> ExplorationContext:
        """Ask the model why the trajectory raised the signal. On failure (counted), a context
        built from the trajectory alone, so exploration can still follow the signal's guidance."""
        try:
            reply = self.complete("reflect", self._reflect_messages(signal, trajectory, task))
            return self._context_from_reply(signal, trajectory, reply)
        except BudgetExhausted:
            raise
        except (ReplyParseError, TeacherCallError) as e:
            self._fail("reflect", str(e))
        except Exception as e:  # a bug or a surprising reply must not stop training
            self._fail("reflect", f"{type(e).__name__}: {e}")
        return self._fallback_context(signal, trajectory, task, self.last_error or "")

    async def areflect(self, signal: Signal, trajectory: Trajectory, task: Task) -> ExplorationContext:
        """``reflect`` over ``litellm.acompletion``, for reflecting on many signals concurrently."""
        try:
            reply = await self.acomplete("reflect", self._reflect_messages(signal, trajectory, task))
            return self._context_from_reply(signal, trajectory, reply)
        except BudgetExhausted:
            raise
        except (ReplyParseError, TeacherCallError) as e:
            self._fail("reflect", str(e))
        except Exception as e:
            self._fail("reflect", f"{type(e).__name__}: {e}")
        return self._fallback_context(signal, trajectory, task, self.last_error or "")

    # ------------------------------------------------------------------ explore
    @staticmethod
    def _context_text(context: ExplorationContext) -> str:
        return json.dumps(context.model_dump(exclude={"signal_kind"}), ensure_ascii=False, indent=1)

    @staticmethod
    def _tools_text(env: AgentEnv, limit: int = 12_000) -> str:
        try:
            tools = [t.as_openai()["function"] for t in env.tools()]
        except Exception as e:
            return f"(the environment could not list its tools: {type(e).__name__})"
        return _clip(json.dumps(tools, ensure_ascii=False), limit)

    def _opening_text(self, messages: list[dict[str, Any]]) -> str:
        return "\n\n".join(f"[{m.get('role', '?')}] {_clip(m.get('content', ''), 4000)}" for m in messages) or "(no opening messages)"

    def _history_text(self, history: list[str]) -> str:
        if not history:
            return "(nothing yet: this is the first action of the run)"
        shown = history[-self.o.history_steps :]
        skipped = len(history) - len(shown)
        return (f"({skipped} earlier steps not shown)\n\n" if skipped else "") + "\n\n".join(shown)

    def explore(self, env: AgentEnv, task: Task, context: ExplorationContext, seed: int = 0) -> list[Triplet]:
        """Independent rounds in ``env``; each step the model proposes one action for the env.

        A reply without a usable action is counted and noted in the round's history; after
        ``max_consecutive_bad_replies`` of them, or a request that failed for good, the round
        ends and the next one starts. Actions the environment rejects are recorded with
        ``ok=False``.
        """
        o = self.o
        guidance = self.prompts.guidance(context.signal_kind).render(context=self._context_text(context), signal_kind=context.signal_kind)[-1]["content"]
        action_format = str(getattr(env, "action_format", None) or DEFAULT_ACTION_FORMAT)
        prompt = self.prompts.get("explore")
        triplets: list[Triplet] = []
        for r in range(o.rounds):
            try:
                _, info = env.reset(seed=seed * 1000 + r, options={"task": task})
            except Exception as e:
                self._fail("explore", f"round {r}: environment reset failed: {type(e).__name__}: {_clip(e, 300)}")
                return triplets
            opening = self._opening_text(info.get("messages", []))
            tools = self._tools_text(env)
            history: list[str] = []
            bad = 0
            for k in range(o.steps_per_round):
                if env.done:
                    break
                messages = prompt.render(action_format=action_format, guidance=guidance, opening=opening, tools=tools, history=self._history_text(history))
                try:
                    action = extract_action(self.complete("explore", messages))
                except BudgetExhausted:
                    raise
                except ReplyParseError as e:
                    self._fail("explore", f"round {r} step {k}: {e}")
                    history.append(f"Step {k + 1}: your reply was not used ({e}). Give a reason, then one action inside <action></action>.")
                    bad += 1
                    if bad >= o.max_consecutive_bad_replies:
                        break
                    continue
                except TeacherCallError as e:
                    self._fail("explore", f"round {r} step {k}: {e}")
                    break
                bad = 0
                try:
                    obs, reward, _, _, sinfo = env.step(action)
                except Exception as e:  # AgentEnv.step should not raise, but a plugin's might
                    self._fail("explore", f"round {r} step {k}: environment step raised {type(e).__name__}: {_clip(e, 300)}")
                    break
                ok = not sinfo.get("error")
                triplets.append(Triplet(action=action, observation=obs, round=r, step=k, reward=float(reward), ok=ok))
                history.append(
                    f"Step {k + 1}\nAction: {_clip(action, 2000)}\nObservation: {_clip(obs, o.max_observation_chars)}"
                    + ("" if ok else f"\n(The environment reported an error: {_clip(sinfo.get('error'), 300)})")
                )
        return triplets

    # ------------------------------------------------------------------ abstract
    def _runs_text(self, triplets: list[Triplet]) -> str:
        n = self.o.max_observation_chars
        out = []
        for r in sorted({t.round for t in triplets}):
            steps = sorted((t for t in triplets if t.round == r), key=lambda t: t.step)
            lines = [f"### Run {r + 1}"]
            for t in steps:
                status = "ok" if t.ok else "ERROR"
                lines.append(f"- step {t.step + 1} [{status}]\n  action: {_clip(t.action, 2000)}\n  observation: {_clip(t.observation, n)}")
            out.append("\n".join(lines))
        return "\n\n".join(out)

    def _candidates_from_reply(self, reply: str) -> list[_TaskReply]:
        data = extract_json(reply, (dict, list))
        if isinstance(data, dict):
            if "tasks" not in data:
                raise ReplyParseError("abstraction JSON object has no 'tasks' list")
            data = data["tasks"]
        if not isinstance(data, list):
            raise ReplyParseError(f"'tasks' is {type(data).__name__}, not a list")
        out: list[_TaskReply] = []
        problems: list[str] = []
        for i, item in enumerate(data):
            try:
                out.append(_TaskReply.model_validate(item))
            except ValidationError as e:
                first = e.errors()[0]
                problems.append(f"task {i + 1}: '{'.'.join(map(str, first['loc'])) or '(item)'}' {first['msg']}")
        if problems and not out:
            raise ReplyParseError("no usable task in the reply (" + "; ".join(problems[:3]) + ")")
        for p in problems:
            self._note_dropped(p)
        return out

    def _note_dropped(self, why: str) -> None:
        with self._lock:
            self.dropped.append(why)

    def abstract(
        self, env: AgentEnv, task: Task, triplets: list[Triplet], context: ExplorationContext, existing: set[str]
    ) -> list[CandidateTask]:
        """Candidate tasks from the exploration runs. Structural problems (too few or too many
        actions, duplicates of ``existing``) are dropped here with a note in ``dropped``; whether
        the actions really work is left to the validator, which records its reasons."""
        o = self.o
        if not any(t.ok for t in triplets):
            return []
        prompt = self.prompts.get("abstract")
        messages = prompt.render(
            min_actions=str(o.min_actions),
            max_actions=str(o.max_actions),
            max_candidates=str(o.max_candidates),
            action_format=str(getattr(env, "action_format", None) or DEFAULT_ACTION_FORMAT),
            signal_kind=context.signal_kind,
            context=self._context_text(context),
            task_query=_clip(task.query, 4000),
            tools=self._tools_text(env),
            runs=self._runs_text(triplets),
        )
        try:
            replies = self._candidates_from_reply(self.complete("abstract", messages))
        except BudgetExhausted:
            raise
        except (ReplyParseError, TeacherCallError) as e:
            self._fail("abstract", str(e))
            return []
        except Exception as e:
            self._fail("abstract", f"{type(e).__name__}: {e}")
            return []
        out: list[CandidateTask] = []
        seen = set(existing) | {task.fingerprint()}
        sha = prompt.sha
        for i, rep in enumerate(replies):
            actions = [a.strip() for a in rep.reference_actions if a.strip()]
            why = None
            if len(actions) < o.min_actions:
                why = f"only {len(actions)} reference actions; at least {o.min_actions} are required"
            elif len(actions) > o.max_actions:
                why = f"{len(actions)} reference actions; at most {o.max_actions} are kept"
            cand = CandidateTask(
                description=rep.description.strip(),
                query=rep.query.strip(),
                reference_actions=actions,
                completion_criterion=rep.completion_criterion.strip(),
                parent_task_id=task.id,
                signal_kind=context.signal_kind,
                teacher=self.name,
                prompt_version=self.prompt_version,
                exploration={
                    "model": o.model,
                    "prompt_sha": sha,
                    "rounds": len({t.round for t in triplets}),
                    "steps": len(triplets),
                    "steps_ok": sum(t.ok for t in triplets),
                    "focus_tools": context.focus_tools,
                    "reply_index": i,
                },
            )
            if why is None and cand.fingerprint() in seen:
                why = "repeats a task already in the pool or in this reply"
            if why is not None:
                self._note_dropped(f"abstract: task {i + 1} ('{_clip(rep.query, 80)}'): {why}")
                continue
            seen.add(cand.fingerprint())
            out.append(cand)
            if len(out) >= o.max_candidates:
                break
        return out

    # ------------------------------------------------------------------ judge
    def judge(self, task: Task, trajectory: Trajectory) -> bool | None:
        """The strict judge (paper Fig. 13): did ``trajectory`` accomplish ``task`` as its
        reference actions do? ``None`` when disabled (``use_judge``) or when the judge failed."""
        if not self.o.use_judge:
            return None
        n = self.o.max_observation_chars
        steps = "\n".join(
            f"{i + 1}. {_clip(s.action, 1000)}\n   -> {_clip(s.observation, n)}" + (" [error]" if s.info.get("error") else "")
            for i, s in enumerate(trajectory.steps[:40])
        )
        modality = "tool calls (name and arguments)" if any("<tool_call>" in a for a in task.reference_actions) else "environment actions"
        messages = self.prompts.get("judge").render(
            description=_clip(str(task.payload.get("description") or task.query), 2000),
            query=_clip(task.query, 4000),
            modality=modality,
            reference="\n".join(f"{i + 1}. {a}" for i, a in enumerate(task.reference_actions)) or "(none)",
            trajectory=steps or "(nothing was executed)",
            final_observation=_clip(trajectory.steps[-1].observation, n) if trajectory.steps else "(none)",
        )
        try:
            return parse_judgement(self.complete("judge", messages))
        except BudgetExhausted:
            raise
        except (ReplyParseError, TeacherCallError) as e:
            self._fail("judge", str(e))
        except Exception as e:
            self._fail("judge", f"{type(e).__name__}: {e}")
        return None
