"""BFCL multi-turn (v3 categories, shipped in bfcl-eval's v4 data) as a CoEvolve ``AgentEnv``.

An episode is one BFCL entry: the involved backend classes are instantiated on the entry's
initial configuration, the user turns arrive one by one, and every agent message either calls
tools (executed on the live backend instances; results come back as ``tool`` messages) or
answers in plain text, which ends the current user turn. The finished episode is graded by
BFCL's own ``multi_turn_checker`` on the calls that were executed.

``bfcl_eval`` is imported lazily (see ``coevolve_bfcl._bfcl``), so importing this module is
cheap and never touches BFCL's project root.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevolve_sdk import (
    ActionParseError,
    AgentEnv,
    CandidateTask,
    EnvOptions,
    Outcome,
    RunContext,
    Step,
    Task,
    ToolSpec,
    format_tool_call,
)

from . import _bfcl
from .calls import (
    CallError,
    call_to_toolcall,
    canonical_call,
    check_arguments,
    format_result,
    parse_action,
)
from .describe import describe_steps
from .sampling import sample_call
from .splits import split_of
from .tooldocs import short_description, to_toolspec

__all__ = ["BFCLMultiTurnEnv", "BFCLOptions", "split_of"]

SYSTEM_PROMPT = (
    "You are an assistant that completes the user's requests by calling the available tools.\n"
    "To call a tool, write a block like\n"
    '<tool_call>{"name": "tool_name", "arguments": {"arg": "value"}}</tool_call>\n'
    "You may put several blocks in one message; they run in order and each result comes back to you. "
    "When the request is done, or when it cannot be done with the tools and information you have, "
    "reply in plain text without any tool call; that ends your turn."
)

END_OF_TURN_ANSWER = "Done."
CANNOT_ANSWER = "I cannot complete this request with the available tools and information."


class BFCLOptions(EnvOptions):
    category: Literal["base", "miss_func", "miss_param", "long_context"] = Field(
        "base", description="BFCL multi-turn category: base, miss_func, miss_param or long_context.")
    tool_docs: Literal["full", "compact"] = Field(
        "full", description="full: BFCL's own docs (official); compact: first sentence and typed parameters only.")
    tool_subset: Literal["all", "involved"] = Field(
        "all", description="all: every function of the involved classes (official); involved: only the functions "
                           "the task's ground truth uses plus `distractors` others.")
    distractors: int = Field(3, ge=0, description="Extra functions shown with tool_subset=involved.")
    max_steps_per_turn: int = Field(
        20, ge=1, description="BFCL's per-turn step limit (its MAXIMUM_STEP_LIMIT, 20): the turn is cut after the "
                              "message with tool calls that exceeds it (the 21st; its calls still run), as BFCL's "
                              "harness does.")
    step_limit_fails: bool = Field(
        True, description="Grade an episode 0 when a turn before the last was cut by the step limit, as BFCL does "
                          "(force-terminated: its harness stops the entry there). A cut in the last turn is graded "
                          "normally, as BFCL grades it. The episode still moves on to the next user turn.")
    test_fraction: float = Field(0.5, ge=0.0, le=1.0, description="Share of scenarios in the test split.")
    tools_in_system: bool = Field(
        False, description="Also list the tools (as JSON) in the system message, for policies whose chat "
                           "template does not render tools itself.")
    hidden_callable: bool = Field(
        True, description="miss_func: a held-out function can already be executed before its turn (it is not "
                          "shown), as in BFCL's harness, whose executor runs any method of an involved class. "
                          "BFCL's own ground truth relies on it once (multi_turn_miss_func_49).")
    max_observation_chars: int | None = Field(
        None, ge=16, description="Cut each tool result to this many characters (None: no cut, as BFCL).")
    invalid_calls: Literal["skip", "refuse_message"] = Field(
        "skip", description="skip: run the calls of a message that pass the checks, in order, and answer each "
                            "one that does not with an error in its place (as BFCL's harness, which runs a "
                            "message's calls one by one); refuse_message: run nothing of a message with any "
                            "call that fails the checks, so the state never half-changes.")


class BFCLMultiTurnEnv(AgentEnv):
    """BFCL multi-turn function calling, graded by BFCL's official checker.

    Task payload: ``{"category": ..., "entry": {"id", "question", "initial_config",
    "involved_classes", "missed_function", "ground_truth"}}`` (the BFCL entry and its ground
    truth). Synthetic tasks (:meth:`make_task`) have the same shape with one user turn.
    """

    name: ClassVar[str] = "bfcl-multi-turn"
    version: ClassVar[int] = 0
    Options: ClassVar[type[EnvOptions]] = BFCLOptions

    def __init__(self, options: EnvOptions | dict[str, Any] | None = None, context: RunContext | None = None, *,
                 render_mode: str | None = None, **kwargs: Any):
        super().__init__(options, context, render_mode=render_mode, **kwargs)
        self._run_dir = context.run_dir if context is not None else None
        self._entry: dict[str, Any] = {}
        self._instances: dict[str, Any] = {}
        self._docs: dict[str, dict[str, Any]] = {}
        self._owner: dict[str, str] = {}
        self._visible: list[str] = []
        self._hidden: list[str] = []
        self._shown_pool: list[str] = []
        self._held_out: dict[str, list[str]] = {}
        self._turn = 0
        self._turn_steps = 0
        self._calls: list[list[list[str]]] = []
        self._step_limit_turn: int | None = None  # the first turn the step limit cut
        self._grade: tuple[int, dict[str, Any]] | None = None
        self._version = 0
        self._tasks_cache: dict[str, list[Task]] = {}

    @property
    def opts(self) -> BFCLOptions:
        return self.options  # type: ignore[return-value]

    # ------------------------------------------------------------------ tasks
    def tasks(self, split: str = "train") -> list[Task]:
        """Official entries of the category. ``train``/``test``: the deterministic split of
        :func:`split_of`; ``all``: every entry (the official benchmark)."""
        if split not in ("train", "test", "all"):
            raise ValueError(f"unknown split '{split}'; BFCL splits are 'train', 'test' and 'all'")
        if split not in self._tasks_cache:
            _bfcl.module("utils", self._run_dir)  # BFCL_PROJECT_ROOT -> <run_dir>/bfcl when given
            out = []
            for e in _bfcl.load_entries(self.opts.category):
                side = split_of(e["id"], self.opts.test_fraction)
                if split != "all" and side != split:
                    continue
                out.append(self._entry_task(e, side))
            self._tasks_cache[split] = out
        return [t.model_copy(deep=True) for t in self._tasks_cache[split]]

    def _entry_task(self, e: dict[str, Any], side: str) -> Task:
        first = next((m.get("content", "") for m in (e["question"][0] if e["question"] else []) if m.get("role") == "user"), "")
        return Task(id=e["id"], env=self.name, query=first, origin="benchmark", split=side,
                    payload={"category": self.opts.category, "entry": e},
                    reference_actions=self.ground_truth_actions(e))

    def ground_truth_actions(self, entry: dict[str, Any]) -> list[str]:
        """The entry's ground truth as agent messages: per turn one message with all of the
        turn's calls in ``<tool_call>`` blocks and a closing plain answer (or only the plain
        answer for a turn whose ground truth is empty)."""
        actions: list[str] = []
        for turn in entry["ground_truth"]:
            if turn:
                blocks = []
                for call in turn:
                    name, args = self._named_args(call, entry["involved_classes"])
                    blocks.append(format_tool_call(name, args))
                actions.append("\n".join(blocks))
                actions.append(END_OF_TURN_ANSWER)
            else:
                actions.append(CANNOT_ANSWER)
        return actions

    def _named_args(self, call: str, classes: list[str]) -> tuple[str, dict[str, Any]]:
        tc, pos = call_to_toolcall(call)
        if not pos:
            return tc.name, tc.arguments
        method, doc = self._static_method(tc.name, classes)
        return tc.name, check_arguments(tc.name, method, doc, tc.arguments, pos)

    def _static_method(self, name: str, classes: list[str]) -> tuple[Any, dict[str, Any]]:
        for cls_name in classes:
            for doc in _bfcl.func_docs(cls_name):
                if doc["name"] == name:
                    return getattr(_bfcl.backend_class(cls_name)(), name), doc
        raise CallError(f"no function '{name}' in classes {classes}")

    # ------------------------------------------------------------------ episode
    def begin(self, task: Task) -> list[dict[str, Any]]:
        entry = task.payload.get("entry")
        if not isinstance(entry, dict) or "ground_truth" not in entry:
            raise ValueError(f"task {task.id} has no BFCL entry in its payload (payload['entry'])")
        _bfcl.module("utils", self._run_dir)  # sets BFCL_PROJECT_ROOT before bfcl_eval loads
        self._entry = entry
        long_context = "long_context" in entry["id"].rsplit("_", 1)[0]
        self._instances, self._docs, self._owner = {}, {}, {}
        for cls_name in entry["involved_classes"]:
            inst = _bfcl.backend_class(cls_name)()
            if not _bfcl.is_stateless(cls_name):
                inst._load_scenario(copy.deepcopy(entry["initial_config"].get(cls_name, {})), long_context=long_context)
            self._instances[cls_name] = inst
            for doc in _bfcl.func_docs(cls_name):
                self._docs[doc["name"]] = doc
                self._owner[doc["name"]] = cls_name
        self._held_out = {str(t): list(names) for t, names in (entry.get("missed_function") or {}).items()}
        hidden = {n for names in self._held_out.values() for n in names}
        shown = list(self._docs)
        if self.opts.tool_subset == "involved":
            shown = self._involved_subset(entry)
        self._visible = [n for n in shown if n not in hidden]
        self._shown_pool = shown
        self._hidden = [n for n in shown if n in hidden] if self.opts.hidden_callable else []
        self._turn = 0
        self._turn_steps = 0
        self._calls = [[]]
        self._step_limit_turn = None
        self._grade = None
        self._version += 1
        system = SYSTEM_PROMPT
        if self.opts.tools_in_system:
            system += "\n\nAvailable tools:\n" + "\n".join(json.dumps(t.as_openai()["function"]) for t in self.tools())
        return [{"role": "system", "content": system}, *self._turn_messages(0)]

    def _involved_subset(self, entry: dict[str, Any]) -> list[str]:
        used: list[str] = []
        for turn in entry["ground_truth"]:
            for call in turn:
                n = call.split("(", 1)[0].strip()
                if n in self._docs and n not in used:
                    used.append(n)
        for names in (entry.get("missed_function") or {}).values():
            used.extend(n for n in names if n in self._docs and n not in used)
        rest = sorted(n for n in self._docs if n not in used)
        rng = random.Random(int(hashlib.sha256(entry["id"].encode()).hexdigest()[:8], 16))
        extra = rng.sample(rest, min(self.opts.distractors, len(rest)))
        return [n for n in self._docs if n in used or n in extra]

    def _turn_messages(self, turn: int) -> list[dict[str, Any]]:
        msgs = [dict(m) for m in self._entry["question"][turn]]
        revealed = [n for n in self._held_out.get(str(turn), []) if n in self._docs and n in self._shown_pool]
        if revealed:
            for n in revealed:
                if n not in self._visible:
                    self._visible.append(n)
            specs = [json.dumps(self._spec(n).as_openai()["function"]) for n in revealed]
            msgs.append({"role": "user", "content": "New tools are now available to you:\n" + "\n".join(specs)
                         + "\nUse them if they help with my earlier request."})
        return msgs

    def _spec(self, name: str) -> ToolSpec:
        return to_toolspec(self._docs[name], self.opts.tool_docs)

    def tools(self) -> list[ToolSpec]:
        return [self._spec(n) for n in self._visible]

    def act(self, action: str) -> Outcome:
        try:
            parsed = parse_action(action)
        except (ActionParseError, CallError) as e:
            return self._after([{"role": "user", "content": f"Error: {e}"}], error=str(e), had_calls=True)
        except Exception as e:  # the parser must never take the episode down
            msg = f"the message could not be read ({type(e).__name__})"
            return self._after([{"role": "user", "content": f"Error: {msg}"}], error=msg, had_calls=True)
        if not parsed.calls:
            return self._end_turn([])
        # Check every call before anything runs, so a checker problem is known for each call.
        checked: list[tuple[str, dict[str, Any]] | str] = []  # (name, kwargs) or the reason it cannot run
        for call, pos in zip(parsed.calls, parsed.positional):
            try:
                checked.append((call.name, self._check(call.name, call.arguments, pos)))
            except CallError as e:
                checked.append(str(e))
            except Exception as e:  # a checker bug must not take the episode down
                checked.append(f"the arguments of '{call.name[:60]}' could not be checked ({type(e).__name__})")
        problems = [c for c in checked if isinstance(c, str)]
        if problems and self.opts.invalid_calls == "refuse_message":
            msg = "nothing was run. " + " | ".join(problems)
            return self._after([{"role": "tool", "name": "error", "content": f"Error: {msg}"}],
                               error=msg, had_calls=True)
        messages: list[dict[str, Any]] = []
        errors: list[str] = []
        names: list[str] = []
        executed: list[str] = []
        for item in checked:
            if isinstance(item, str):  # one result per call, in order, so results line up with calls
                errors.append(item)
                messages.append({"role": "tool", "name": "error", "content": f"Error: {item}"})
                continue
            name, args = item
            text, err = self._run(name, args)
            executed.append(canonical_call(name, args))
            names.append(name)
            if err:
                errors.append(f"{name}: {err}")
            if self.opts.max_observation_chars and len(text) > self.opts.max_observation_chars:
                text = text[: self.opts.max_observation_chars] + " ...(cut)"
            messages.append({"role": "tool", "name": name, "content": text})
        if executed:
            # Only calls that ran reach the checker: it re-executes them, and a refused call is
            # exactly what must never be executed outside the checks.
            self._calls[self._turn].append(executed)
            self._version += 1
        return self._after(messages, error="; ".join(errors) or None, had_calls=True, tool_names=names,
                           info={"calls": executed})

    def _check(self, name: str, arguments: dict[str, Any], positional: list[Any]) -> dict[str, Any]:
        """The keyword arguments to call ``name`` with, or ``CallError`` saying why not."""
        if name not in self._visible and name not in self._hidden:
            raise CallError(f"there is no tool named '{name[:80]}' right now")
        method = getattr(self._instances[self._owner[name]], name, None)
        if method is None:
            raise CallError(f"tool '{name}' is not implemented by the backend")
        return check_arguments(name, method, self._docs[name], arguments, positional)

    def _run(self, name: str, args: dict[str, Any]) -> tuple[str, str | None]:
        """Call the backend method. Returns (observation, error or None)."""
        method = getattr(self._instances[self._owner[name]], name)
        try:
            result = method(**copy.deepcopy(args))
        except Exception as e:  # BFCL's executor reports backend exceptions the same way
            return f"Error during execution: {e}", f"{type(e).__name__}: {str(e)[:200]}"
        text = format_result(result)
        err = str(result["error"])[:300] if isinstance(result, dict) and "error" in result else None
        return text, err

    def _after(self, messages: list[dict[str, Any]], error: str | None, had_calls: bool,
               tool_names: list[str] | None = None, info: dict[str, Any] | None = None) -> Outcome:
        info = dict(info or {})
        info["turn"] = self._turn
        if had_calls:
            self._turn_steps += 1
            # BFCL's harness counts a turn's messages with calls and cuts the turn once the
            # count exceeds its limit, i.e. after the 21st message (whose calls did run)
            if self._turn_steps > self.opts.max_steps_per_turn:
                if self._step_limit_turn is None:
                    self._step_limit_turn = self._turn
                out = self._end_turn(messages, info={**info, "step_limit_hit": True})
                out.error, out.tool_names = error, list(tool_names or [])
                return out
        out = Outcome(messages=messages, error=error, tool_names=list(tool_names or []), info=info)
        self._attach_grade_if_ending(out)
        return out

    def _end_turn(self, messages: list[dict[str, Any]], info: dict[str, Any] | None = None) -> Outcome:
        info = dict(info or {})
        info.setdefault("turn", self._turn)
        self._turn += 1
        self._turn_steps = 0
        if self._turn >= len(self._entry["question"]):
            out = Outcome(messages=messages, done=True, info=info)
        else:
            self._calls.append([])
            self._version += 1
            out = Outcome(messages=messages + self._turn_messages(self._turn), info=info)
        self._attach_grade_if_ending(out)
        return out

    def _attach_grade_if_ending(self, out: Outcome) -> None:
        if out.done or len(self.steps) + 1 >= self.options.max_steps:
            out.info["bfcl"] = self.grade()

    # ------------------------------------------------------------------ grading
    def model_calls(self) -> list[list[list[str]]]:
        """The executed calls as ``[turn][step][call]``, padded to the ground truth's turns."""
        gt = self._entry.get("ground_truth", [])
        calls = [[list(s) for s in t] for t in self._calls[: len(gt)]]
        return calls + [[] for _ in range(len(gt) - len(calls))]

    def grade(self) -> dict[str, Any]:
        """The official verdict plus a per-turn progress figure (cached until the next call)."""
        if self._grade is not None and self._grade[0] == self._version:
            return self._grade[1]
        entry, calls = self._entry, self.model_calls()
        result = _bfcl.official_check(calls, entry)
        n = len(entry["ground_truth"])
        if result.get("valid"):
            passed = n
        else:
            passed = 0
            for k in range(1, n + 1):
                sub = dict(entry, ground_truth=entry["ground_truth"][:k])
                if not _bfcl.official_check(calls[:k], sub).get("valid"):
                    break
                passed = k
        # BFCL's harness stops the entry at the cut; its grader then finds fewer turns than the
        # ground truth has and fails the entry as force-terminated, unless the cut turn was the last
        force_terminated = self._step_limit_turn is not None and self._step_limit_turn < n - 1
        valid = bool(result.get("valid")) and not (force_terminated and self.opts.step_limit_fails)
        g = {
            "valid": valid,
            "checker_valid": bool(result.get("valid")),
            "error_type": result.get("error_type") if not result.get("valid") else
            ("multi_turn:force_terminated" if not valid else None),
            "error_message": str(result.get("error_message", ""))[:300] or None,
            "turns_passed": passed,
            "turns": n,
            "progress": passed / n if n else 0.0,
            "force_terminated": force_terminated,
            "step_limit_turn": self._step_limit_turn,
        }
        self._grade = (self._version, g)
        return g

    def score(self) -> float:
        if not self._entry:
            return 0.0
        return 1.0 if self.grade()["valid"] else 0.0

    # ------------------------------------------------------------------ exploration
    def sample_action(self) -> str:
        name, args = sample_call(self, self.np_random)
        return format_tool_call(name, args)

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        return describe_steps(self.short_doc, steps)

    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        """A BFCL-format entry on ``base``'s initial state with one user turn (the candidate's
        query) whose ground truth is the candidate's reference calls, so that the official
        checker grades it like any BFCL entry."""
        if base is None or not isinstance(base.payload.get("entry"), dict):
            raise ValueError("a BFCL synthetic task needs a BFCL base task (its initial state)")
        be = base.payload["entry"]
        classes = list(be["involved_classes"])
        calls: list[str] = []
        for action in candidate.reference_actions:
            parsed = parse_action(action)
            if not parsed.calls:
                continue
            for c, pos in zip(parsed.calls, parsed.positional):
                method, doc = self._static_method(c.name, classes)
                calls.append(canonical_call(c.name, check_arguments(c.name, method, doc, c.arguments, pos)))
        if not calls:
            raise ValueError("the candidate's reference actions contain no tool call")
        cat = _bfcl.category_name(base.payload.get("category", self.opts.category))
        digest = hashlib.sha256(json.dumps([be["id"], candidate.query, calls]).encode()).hexdigest()[:12]
        entry = {
            "id": f"{cat}_syn{digest}",
            "question": [[{"role": "user", "content": candidate.query}]],
            "initial_config": copy.deepcopy(be["initial_config"]),
            "involved_classes": classes,
            "missed_function": {},
            "ground_truth": [calls],
        }
        payload = {"category": base.payload.get("category", self.opts.category), "entry": entry, "base_id": be["id"]}
        # like the official entries' ground truth actions, the turn ends with a plain answer:
        # an agent that imitates the reference learns to stop calling tools when it is done
        actions = list(candidate.reference_actions)
        if parse_action(actions[-1]).calls:
            actions.append(END_OF_TURN_ANSWER)
        return Task(env=self.name, query=candidate.query, origin="synthetic", split="train", payload=payload,
                    reference_actions=actions)

    # ------------------------------------------------------------------ what the sampler reads
    def tool_names(self) -> list[str]:
        return list(self._visible)

    def owner_of(self, name: str) -> str:
        return self._owner[name]

    def instance_of(self, name: str) -> Any:
        return self._instances[self._owner[name]]

    def doc_of(self, name: str) -> dict[str, Any]:
        return self._docs[name]

    def short_doc(self, name: str) -> str:
        return short_description(self._docs[name].get("description", ""))
