"""The LLM teacher: reflection, signal-guided re-exploration and task abstraction through litellm.

``LiteLLMTeacher`` speaks to any model string litellm accepts (``dashscope/qwen3-max`` as in
the paper, an OpenAI model, ``hosted_vllm/...`` or ``ollama/...`` servers). For each signal:

1. **reflect** — the signalled trajectory goes to the model, which answers with a JSON object
   parsed strictly into ``coevolve_sdk.records.ExplorationContext``;
2. **explore** — several independent rounds of several steps in a fresh instance of the real
   environment; at each step the model sees the guidance template of the signal's kind, the
   context, the tools, the task's opening messages and the round's history, and proposes one
   action, which the environment executes (a ``coevolve_sdk.records.Triplet`` per step);
3. **abstract** — the exploration runs go to the model, which answers with a JSON list of
   candidate tasks (query, reference actions, completion criterion);
4. **judge** (optional) — the strict judge of the paper, answering ``Success: true/false``.

Robustness is the point. Requests go through :class:`~coevolve_litellm.client.LiteLLMClient`
(retries, a concurrency bound, the budget). ``coevolve_sdk.errors.BudgetExhausted`` is the only
exception the stages let out; every other failure (a request that kept failing, a malformed or
empty reply, an environment that raised) is counted in ``failures`` and in the usage meter, and
the stage returns what it has (an empty list, or a context built from the trajectory alone).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable

from pydantic import ValidationError

from coevolve_sdk import (
    AgentEnv,
    BudgetExhausted,
    CandidateTask,
    ConfigError,
    ExplorationContext,
    RunContext,
    Signal,
    Task,
    Teacher,
    TeacherStages,
    TeacherUsage,
    Trajectory,
    Triplet,
)

from .client import LiteLLMClient, TeacherCallError
from .options import LiteLLMTeacherOptions, TeacherBudget
from .parsing import (
    ReflectionReply,
    ReplyParseError,
    TaskReply,
    extract_action,
    extract_json,
    parse_judgement,
)
from .prompts import DEFAULT_ACTION_FORMAT, PromptSet, clip

__all__ = ["LiteLLMTeacher"]


class LiteLLMTeacher(Teacher):
    """A teacher backed by any LLM that litellm can reach.

    Thread-safe: the evolution stage may call one instance from several worker threads at once.
    Usage (``spent``), ``failures`` and the budget are shared by those threads; the client's
    semaphore bounds the requests in flight to ``options.concurrency``.

    ``failures`` lists a reason for every stage that failed (``"reflect: reply holds no JSON
    object"``) and ``last_error`` holds the newest one; ``dropped`` lists candidates discarded
    before validation (too few actions, duplicates) with the reason. Budget exhaustion is
    counted there too, and raised as ``coevolve_sdk.errors.BudgetExhausted``.
    """

    name = "litellm"
    Options = LiteLLMTeacherOptions
    prompt_version = "v1"

    def __init__(self, options: LiteLLMTeacherOptions | dict[str, Any] | None = None, context: RunContext | None = None) -> None:
        super().__init__(options, context)
        self.options: LiteLLMTeacherOptions
        o = self.options
        self.prompt_version = o.prompt_version  # type: ignore[misc]
        self.prompts = PromptSet(o.prompt_version, o.prompt_dir)
        if o.api_key_env is not None and not os.environ.get(o.api_key_env):
            raise ConfigError(f"teacher option api_key_env names {o.api_key_env}, but that environment variable is not set. Export it before the run.")
        self.client = LiteLLMClient(o, name=self.name, seed=context.seed if context is not None else 0, on_failure=self._fail)
        self._lock = threading.Lock()
        self.failures: list[str] = []
        self.dropped: list[str] = []
        self.last_error: str | None = None
        #: what the model's replies did at each stage, e.g. ``{"reflect": {"replies": 3, "parsed": 2,
        #: "parse_failures": 1, "empty": 0}, ...}``; also written to ``teacher-stages.json`` in the run folder
        self.stage_counts: dict[str, dict[str, int]] = {}
        #: the first replies of each stage, cut short: what the model said, also when nothing parsed
        self.reply_samples: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ client and bookkeeping
    @property
    def spent(self) -> TeacherUsage:
        """Usage so far (calls, tokens, US dollars, failures) over every thread."""
        return self.client.spent

    @property
    def sleep(self) -> Callable[[float], None]:
        """How a backoff delay is waited out (replaceable: tests record the delays instead)."""
        return self.client.sleep

    @sleep.setter
    def sleep(self, fn: Callable[[float], None]) -> None:
        self.client.sleep = fn

    def complete(self, stage: str, messages: list[dict[str, str]]) -> str:
        """One chat completion (see ``LiteLLMClient.complete``)."""
        return self.client.complete(stage, messages)

    def reset_budget(self, budget: TeacherBudget | None = None) -> None:
        """Start counting the budget afresh (optionally with new limits): ``spent`` restarts from
        zero, except its count of failures."""
        self.client.reset_budget(budget)

    def budget_left(self) -> dict[str, float | None]:
        """What remains of each limit (``None``: unlimited)."""
        return self.client.budget_left()

    def _count(self, stage: str, key: str, n: int = 1) -> None:
        with self._lock:
            c = self.stage_counts.setdefault(stage, {})
            c[key] = c.get(key, 0) + n

    def _sample(self, stage: str, reply: str, keep: int = 3) -> None:
        with self._lock:
            got = self.reply_samples.setdefault(stage, [])
            if len(got) < keep:
                got.append(clip(reply, 600))

    def _save_counts(self) -> None:
        """``teacher-stages.json`` in the run folder: the stage counts so far (written whole, atomically)."""
        run_dir = getattr(self.context, "run_dir", None)
        if run_dir is None:
            return
        try:
            from pathlib import Path

            with self._lock:
                text = json.dumps({"teacher": self.name, "model": self.options.model, "stages": self.stage_counts,
                                   "reply_samples": self.reply_samples}, indent=1, sort_keys=True, ensure_ascii=False)
            path = Path(run_dir) / "teacher-stages.json"
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a record that cannot be written must not stop the teacher

    def stages(self) -> TeacherStages:
        """The stage counts and reply samples so far (a copy), for the round's record and the report."""
        with self._lock:
            return TeacherStages(stages={k: dict(v) for k, v in self.stage_counts.items()},
                                 replies={k: list(v) for k, v in self.reply_samples.items()})

    def _fail(self, stage: str, reason: str) -> None:
        msg = f"{stage}: {reason}"
        with self._lock:
            self.failures.append(msg)
            self.last_error = msg
        self.client.account(TeacherUsage(failures=1))
        if self.context is not None:
            try:
                self.context.log(f"[teacher {self.name}] {clip(msg, 300)}")
            except Exception:
                pass

    # ------------------------------------------------------------------ reflect
    def _reflect_messages(self, signal: Signal, trajectory: Trajectory, task: Task) -> list[dict[str, str]]:
        n = self.options.max_observation_chars
        lines = []
        for i, s in enumerate(trajectory.steps[:40]):
            err = s.info.get("error")
            lines.append(f"Step {i + 1}\nAction: {clip(s.action, n)}\nObservation: {clip(s.observation, n)}" + (f"\nError: {clip(err, 300)}" if err else ""))
        if len(trajectory.steps) > 40:
            lines.append(f"... {len(trajectory.steps) - 40} more steps not shown")
        outcome = f"{'success' if trajectory.success else 'failure'}; score {trajectory.score:.2f}; {len(trajectory.steps)} actions" + (
            "; stopped at the step limit" if trajectory.truncated else ""
        )
        return self.prompts.get("reflect").render(
            signal_kind=signal.kind,
            signal_reason=signal.reason or "(none given)",
            signal_evidence=clip(json.dumps(signal.evidence, ensure_ascii=False, default=str), 1500),
            task_query=clip(task.query, 4000),
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
            summary=f"Task: {clip(task.query, 500)} (the agent {'succeeded' if trajectory.success else 'failed'}, score {trajectory.score:.2f}). Reflection unavailable: {clip(why, 200)}",
            failure_cause=signal.reason,
            focus_pattern=[trajectory.action_pattern] if trajectory.action_pattern else [],
            focus_tools=tools,
        )

    def _context_from_reply(self, signal: Signal, trajectory: Trajectory, reply: str) -> ExplorationContext:
        data = extract_json(reply, dict)
        try:
            r = ReflectionReply.model_validate(data)
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
            self._count("reflect", "replies")
            self._sample("reflect", reply)
            ctx = self._context_from_reply(signal, trajectory, reply)
            self._count("reflect", "parsed")
            if not ctx.summary.strip() and not ctx.exploration_objectives and not ctx.failure_cause:
                self._count("reflect", "empty")
            return ctx
        except BudgetExhausted:
            raise
        except ReplyParseError as e:
            self._count("reflect", "parse_failures")
            self._fail("reflect", str(e))
        except TeacherCallError as e:
            self._count("reflect", "call_failures")
            self._fail("reflect", str(e))
        except Exception as e:  # a bug or a surprising reply must not stop training
            self._count("reflect", "other_failures")
            self._fail("reflect", f"{type(e).__name__}: {e}")
        finally:
            self._save_counts()
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
        return clip(json.dumps(tools, ensure_ascii=False), limit)

    def _opening_text(self, messages: list[dict[str, Any]]) -> str:
        return "\n\n".join(f"[{m.get('role', '?')}] {clip(m.get('content', ''), 4000)}" for m in messages) or "(no opening messages)"

    def _history_text(self, history: list[str]) -> str:
        if not history:
            return "(nothing yet: this is the first action of the run)"
        shown = history[-self.options.history_steps :]
        skipped = len(history) - len(shown)
        return (f"({skipped} earlier steps not shown)\n\n" if skipped else "") + "\n\n".join(shown)

    def explore(self, env: AgentEnv, task: Task, context: ExplorationContext, seed: int = 0) -> list[Triplet]:
        """Independent rounds in ``env``; each step the model proposes one action for the env.

        A reply without a usable action is counted and noted in the round's history; after
        ``max_consecutive_bad_replies`` of them, or a request that failed for good, the round
        ends and the next one starts. Actions the environment rejects are recorded with
        ``ok=False``.
        """
        o = self.options
        guidance = self.prompts.guidance(context.signal_kind).render(context=self._context_text(context), signal_kind=context.signal_kind)[-1]["content"]
        action_format = str(getattr(env, "action_format", None) or DEFAULT_ACTION_FORMAT)
        prompt = self.prompts.get("explore")
        triplets: list[Triplet] = []
        for r in range(o.rounds):
            try:
                _, info = env.reset(seed=seed * 1000 + r, options={"task": task})
            except Exception as e:
                self._fail("explore", f"round {r}: environment reset failed: {type(e).__name__}: {clip(e, 300)}")
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
                    reply = self.complete("explore", messages)
                    self._count("explore", "replies")
                    self._sample("explore", reply)
                    action = extract_action(reply)
                except BudgetExhausted:
                    raise
                except ReplyParseError as e:
                    self._count("explore", "unusable")
                    self._fail("explore", f"round {r} step {k}: {e}")
                    history.append(f"Step {k + 1}: your reply was not used ({e}). Give a reason, then one action inside <action></action>.")
                    bad += 1
                    if bad >= o.max_consecutive_bad_replies:
                        break
                    continue
                except TeacherCallError as e:
                    self._count("explore", "call_failures")
                    self._fail("explore", f"round {r} step {k}: {e}")
                    break
                bad = 0
                self._count("explore", "actions")
                try:
                    obs, reward, _, _, sinfo = env.step(action)
                except Exception as e:  # AgentEnv.step should not raise, but a plugin's might
                    self._fail("explore", f"round {r} step {k}: environment step raised {type(e).__name__}: {clip(e, 300)}")
                    break
                ok = not sinfo.get("error")
                self._count("explore", "actions_ok" if ok else "actions_rejected_by_env")
                triplets.append(Triplet(action=action, observation=obs, round=r, step=k, reward=float(reward), ok=ok))
                history.append(
                    f"Step {k + 1}\nAction: {clip(action, 2000)}\nObservation: {clip(obs, o.max_observation_chars)}"
                    + ("" if ok else f"\n(The environment reported an error: {clip(sinfo.get('error'), 300)})")
                )
        self._save_counts()
        return triplets

    # ------------------------------------------------------------------ abstract
    def _runs_text(self, triplets: list[Triplet]) -> str:
        n = self.options.max_observation_chars
        out = []
        for r in sorted({t.round for t in triplets}):
            steps = sorted((t for t in triplets if t.round == r), key=lambda t: t.step)
            lines = [f"### Run {r + 1}"]
            for t in steps:
                status = "ok" if t.ok else "ERROR"
                lines.append(f"- step {t.step + 1} [{status}]\n  action: {clip(t.action, 2000)}\n  observation: {clip(t.observation, n)}")
            out.append("\n".join(lines))
        return "\n\n".join(out)

    def _candidates_from_reply(self, reply: str) -> list[TaskReply]:
        data = extract_json(reply, (dict, list))
        if isinstance(data, dict):
            if "tasks" not in data:
                raise ReplyParseError("abstraction JSON object has no 'tasks' list")
            data = data["tasks"]
        if not isinstance(data, list):
            raise ReplyParseError(f"'tasks' is {type(data).__name__}, not a list")
        out: list[TaskReply] = []
        problems: list[str] = []
        for i, item in enumerate(data):
            try:
                out.append(TaskReply.model_validate(item))
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
        o = self.options
        if not any(t.ok for t in triplets):
            self._count("abstract", "skipped_no_ok_action")
            self._save_counts()
            return []
        prompt = self.prompts.get("abstract")
        messages = prompt.render(
            min_actions=str(o.min_actions),
            max_actions=str(o.max_actions),
            max_candidates=str(o.max_candidates),
            action_format=str(getattr(env, "action_format", None) or DEFAULT_ACTION_FORMAT),
            signal_kind=context.signal_kind,
            context=self._context_text(context),
            task_query=clip(task.query, 4000),
            tools=self._tools_text(env),
            runs=self._runs_text(triplets),
        )
        try:
            raw = self.complete("abstract", messages)
            self._count("abstract", "replies")
            self._sample("abstract", raw)
            replies = self._candidates_from_reply(raw)
        except BudgetExhausted:
            raise
        except ReplyParseError as e:
            self._count("abstract", "parse_failures")
            self._fail("abstract", str(e))
            self._save_counts()
            return []
        except TeacherCallError as e:
            self._count("abstract", "call_failures")
            self._fail("abstract", str(e))
            self._save_counts()
            return []
        except Exception as e:
            self._count("abstract", "other_failures")
            self._fail("abstract", f"{type(e).__name__}: {e}")
            self._save_counts()
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
                    "reply_excerpt": clip(raw, 1200),
                },
            )
            if why is None and cand.fingerprint() in seen:
                why = "repeats a task already in the pool or in this reply"
            if why is not None:
                self._note_dropped(f"abstract: task {i + 1} ('{clip(rep.query, 80)}'): {why}")
                self._count("abstract", "dropped")
                continue
            seen.add(cand.fingerprint())
            out.append(cand)
            if len(out) >= o.max_candidates:
                break
        self._count("abstract", "proposed", len(out))
        self._save_counts()
        return out

    # ------------------------------------------------------------------ judge
    def judge(self, task: Task, trajectory: Trajectory) -> bool | None:
        """The strict judge (paper Fig. 13): did ``trajectory`` accomplish ``task`` as its
        reference actions do? ``None`` when disabled (``use_judge``) or when the judge failed."""
        if not self.options.use_judge:
            return None
        n = self.options.max_observation_chars
        steps = "\n".join(
            f"{i + 1}. {clip(s.action, 1000)}\n   -> {clip(s.observation, n)}" + (" [error]" if s.info.get("error") else "")
            for i, s in enumerate(trajectory.steps[:40])
        )
        modality = "tool calls (name and arguments)" if any("<tool_call>" in a for a in task.reference_actions) else "environment actions"
        messages = self.prompts.get("judge").render(
            description=clip(str(task.payload.get("description") or task.query), 2000),
            query=clip(task.query, 4000),
            modality=modality,
            reference="\n".join(f"{i + 1}. {a}" for i, a in enumerate(task.reference_actions)) or "(none)",
            trajectory=steps or "(nothing was executed)",
            final_observation=clip(trajectory.steps[-1].observation, n) if trajectory.steps else "(none)",
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
