"""``check_env``: the contracts an environment plugin must keep, checked in one call.

gymnasium's ``check_env`` tests the gymnasium surface. A CoEvolve environment promises more,
and a broken promise otherwise shows up far from its cause (a task payload missing a key fails
at warm start, a sampler that draws invalid calls makes exploration admit nothing, an ``act``
that raises costs the agent an action on every bad message). Each contract below is checked on
its own, so one report lists every problem, each with how to fix it:

``construct``    the environment can be built from its options
``gymnasium``    gymnasium's own ``check_env`` passes
``tools``        ``tools()`` returns ``ToolSpec`` records with distinct names
``tasks``        every split's tasks are ``Task`` records (not dicts) with distinct ids; train is not empty
``begin``        ``begin(task)`` returns a list of ``{"role", "content"}`` messages for every task
``replay``       every task's reference actions replay without an error to a success
``scores``       every score lies in [0, 1]
``sample_action`` ``sample_action()`` returns strings that the environment executes without an error
                 (up to ``max_sample_error_rate`` of them may be refused)
``synthetic``    a task made by the random explorer from a train task passes validation
``determinism``  the same seed and task give the same episode
``malformed``    a few hundred malformed actions give error observations, never an exception

Use it in a plugin's tests (``check_env(MyEnv)`` raises :class:`EnvCheckError` with the report)
or from the command line (``coevolve check env NAME``, exit status 2 when a contract fails).
"""

from __future__ import annotations

import json
import traceback
import warnings
from typing import Any, Callable, Iterable

import numpy as np
from pydantic import BaseModel, Field

from coevolve_sdk.env.actions import format_tool_call
from coevolve_sdk.components.blame import ComponentError
from coevolve_sdk.env.contract import GraderError, ToolReturnTypeError
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.errors import CoEvolveError
from coevolve_sdk.records import Task, ToolSpec

__all__ = ["check_env", "CheckReport", "ContractResult", "EnvCheckError", "CONTRACTS", "malformed_actions"]

#: The contracts, in the order they are checked, with what each one means.
CONTRACTS: dict[str, str] = {
    "construct": "the environment can be built from its options",
    "gymnasium": "gymnasium's check_env passes",
    "tools": "tools() returns ToolSpec records with distinct names",
    "tasks": "every split's tasks are Task records with distinct ids, and train has tasks",
    "begin": "begin(task) returns a list of {'role', 'content'} messages",
    "replay": "every task's reference actions replay without an error to a success",
    "scores": "scores lie in [0, 1]",
    "sample_action": "sample_action() returns actions the environment executes without an error",
    "synthetic": "a task made by the random explorer from a train task passes validation",
    "determinism": "the same seed and task give the same episode",
    "malformed": "malformed actions give error observations, never an exception",
}


class ContractResult(BaseModel):
    name: str
    status: str = Field(description="passed, failed or skipped")
    message: str = ""
    fix: str = ""
    details: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "failed"


class CheckReport(BaseModel):
    """The outcome of every contract for one environment."""

    env: str
    results: list[ContractResult] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failed(self) -> list[ContractResult]:
        return [r for r in self.results if r.status == "failed"]

    def result(self, name: str) -> ContractResult:
        return next(r for r in self.results if r.name == name)

    def __str__(self) -> str:
        lines = [f"Contracts of environment '{self.env}':"]
        for r in self.results:
            mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}.get(r.status, r.status)
            lines.append(f"  [{mark}] {r.name}: {r.message or CONTRACTS.get(r.name, '')}")
            for d in r.details[:5]:
                lines.append(f"         - {d}")
            if len(r.details) > 5:
                lines.append(f"         - ... and {len(r.details) - 5} more")
            if r.status == "failed" and r.fix:
                lines.append(f"         fix: {r.fix}")
        n = len(self.failed)
        lines.append("All contracts hold." if n == 0 else f"{n} contract{'s' if n > 1 else ''} failed: {', '.join(r.name for r in self.failed)}.")
        return "\n".join(lines)


class EnvCheckError(CoEvolveError, AssertionError):
    """An environment broke at least one contract; the message is the whole report."""

    def __init__(self, report: CheckReport) -> None:
        self.report = report
        super().__init__(str(report))


def _short(x: Any, n: int = 120) -> str:
    s = x if isinstance(x, str) else repr(x)
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 3] + "..."


def _exc(e: BaseException) -> str:
    return f"{type(e).__name__}: {_short(str(e), 300)}"


def _where(frame: str) -> str:
    """``File "x.py", line 9, in f\n    code`` as ``x.py:9 in f: code``."""
    import re

    m = re.match(r'\s*File "([^"]+)", line (\d+), in (\S+)\s*(.*)', frame, re.S)
    if not m:
        return frame.strip()
    code = m.group(4).strip().splitlines()[0].strip() if m.group(4).strip() else ""
    return f"{m.group(1)}:{m.group(2)} in {m.group(3)}" + (f": {code}" if code else "")


class _Failed(Exception):
    def __init__(self, message: str, fix: str = "", details: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.details = list(details)


# ---------------------------------------------------------------------- malformed actions
def malformed_actions(tools: list[ToolSpec], n: int = 300, seed: int = 0) -> list[str]:
    """Deterministic bad agent output: garbage text, broken ``<tool_call>`` blocks, unknown
    tools, missing, extra and wrongly typed arguments for each real tool."""
    rng = np.random.default_rng(seed)
    out: list[str] = [
        "", " ", "\n\n", "\x00", "<tool_call>", "</tool_call>", "<tool_call></tool_call>", "<tool_call>{</tool_call>",
        "<tool_call>[]</tool_call>", "<tool_call>null</tool_call>", '<tool_call>{"name": 3}</tool_call>',
        '<tool_call>{"name": ""}</tool_call>', '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "x", "arguments": "not json"}</tool_call>', '<tool_call>{"name": "x", "arguments": [1, 2]}</tool_call>',
        '<tool_call><tool_call>{"name": "x"}</tool_call></tool_call>', '{"name": "x", "arguments": {}}', "x" * 25_000,
        "<tool_call>" + "{" * 500 + "</tool_call>", "f(x=1)", "[f(x=1), g()]", "\u202e\ufeff\U0001f600",
        format_tool_call("", {}), format_tool_call("no_such_tool_at_all", {"a": 1}),
    ]
    bad_values: list[Any] = [None, True, -1, 10**18, 1.5, "", "x" * 300, [], [1, "a"], {}, {"k": [None]}]
    for t in tools:
        props = dict((t.parameters or {}).get("properties", {}) or {})
        out.append(format_tool_call(t.name, {}))
        out.append(format_tool_call(t.name, {"__unexpected__": 1}))
        out.append(f'<tool_call>{{"name": "{t.name}", "arguments": {{</tool_call>')
        out.append(format_tool_call(t.name.upper() + "_", {}))
        for p in props:
            for v in bad_values:
                out.append(format_tool_call(t.name, {q: v for q in props} | {p: v}))
    alphabet = list("abcxyz{}[]<>\"':,/ \n0123456789_") + ["<tool_call>", "</tool_call>", '"name"', '"arguments"']
    while len(out) < n:
        k = int(rng.integers(1, 40))
        out.append("".join(alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=k)))
    if len(out) > n:  # keep the structured ones first, sample the rest evenly
        head, rest = out[:24], out[24:]
        idx = np.linspace(0, len(rest) - 1, num=max(0, n - len(head))).astype(int)
        out = head + [rest[i] for i in idx]
    return out


# ---------------------------------------------------------------------- the checker
class _Checker:
    def __init__(self, factory: Callable[[], AgentEnv], env: AgentEnv, label: str, splits: list[str] | None, seed: int,
                 malformed: int, max_tasks: int | None, sample_steps: int, max_sample_error_rate: float) -> None:
        self.factory = factory
        self.max_sample_error_rate = max_sample_error_rate
        self.env = env
        self.label = label
        self.splits_wanted = splits
        self.seed = seed
        self.malformed = malformed
        self.max_tasks = max_tasks
        self.sample_steps = sample_steps
        self.splits: dict[str, list[Task]] = {}
        self.report = CheckReport(env=label)
        self.scores: list[tuple[str, float]] = []

    def run(self, name: str, fn: Callable[[], str], needs: Iterable[str] = ()) -> None:
        missing = [n for n in needs if not self._passed(n)]
        if missing:
            self.report.results.append(ContractResult(name=name, status="skipped", message=f"needs {', '.join(missing)} to pass first"))
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                msg = fn()
            self.report.results.append(ContractResult(name=name, status="passed", message=msg))
        except _Failed as f:
            self.report.results.append(ContractResult(name=name, status="failed", message=f.message, fix=f.fix, details=f.details))
        except (GraderError, ToolReturnTypeError) as e:  # the environment's own bug, named with its lines
            self.report.results.append(ContractResult(
                name=name, status="failed", message=e.headline, fix=e.fix, details=[_where(f) for f in e.frames]))
        except Exception as e:  # a contract's own code path raised: that is the finding
            tb = traceback.extract_tb(e.__traceback__)
            where = next((f"{fr.filename}:{fr.lineno} in {fr.name}" for fr in reversed(tb) if "coevolve_sdk/authoring/check.py" not in fr.filename), "")
            self.report.results.append(ContractResult(
                name=name, status="failed", message=f"raised {_exc(e)}", details=[where] if where else [],
                fix=f"the environment must not raise while {CONTRACTS.get(name, name)}"))

    def _passed(self, name: str) -> bool:
        return any(r.name == name and r.status == "passed" for r in self.report.results)

    def _tasks(self, split: str) -> list[Task]:
        ts = self.splits.get(split, [])
        return ts if self.max_tasks is None else ts[: self.max_tasks]

    # ------------------------------------------------------------ contracts
    def gymnasium(self) -> str:
        from gymnasium.utils.env_checker import check_env as gym_check_env

        gym_check_env(self.factory(), skip_render_check=True)
        return "gymnasium's check_env passed"

    def tools(self) -> str:
        specs = self.env.tools()
        if not isinstance(specs, list):
            raise _Failed(f"tools() returned {type(specs).__name__}", "return a list of ToolSpec records")
        bad = [f"item {i}: {type(s).__name__}" for i, s in enumerate(specs) if not isinstance(s, ToolSpec)]
        if bad:
            raise _Failed(f"tools() returned {len(bad)} items that are not ToolSpec", "return ToolSpec(name=..., description=..., parameters={...})", bad)
        names = [s.name for s in specs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise _Failed(f"tool names repeat: {', '.join(dup)}", "give every tool a distinct name")
        for s in specs:
            json.dumps(s.as_openai())
        return f"{len(specs)} tools"

    def tasks(self) -> str:
        problems: list[str] = []
        wanted = self.splits_wanted or ["train", "test"]
        for split in wanted:
            try:
                got = self.env.tasks(split)
            except (GraderError, ToolReturnTypeError):
                raise
            except ComponentError as e:  # AgentEnv's own check of what tasks() returned
                problems.append(f"tasks('{split}'): {e.error}")
                continue
            except Exception as e:
                if split == "train" or self.splits_wanted:
                    problems.append(f"tasks('{split}') raised {_exc(e)}")
                continue
            if not isinstance(got, list):
                problems.append(f"tasks('{split}') returned {type(got).__name__}, not a list")
                continue
            wrong = [(i, type(t).__name__) for i, t in enumerate(got) if not isinstance(t, Task)]
            if wrong:
                i, kind = wrong[0]
                hint = " (use Task(**d) or Task.model_validate(d))" if kind == "dict" else ""
                problems.append(f"tasks('{split}') returned {len(wrong)} items that are not Task records; item {i} is a {kind}{hint}")
                continue
            ids = [t.id for t in got]
            dup = sorted({x for x in ids if ids.count(x) > 1})
            if dup:
                problems.append(f"tasks('{split}') repeats ids: {', '.join(dup[:5])}")
            for t in got:
                try:
                    Task.model_validate_json(t.model_dump_json())
                except Exception as e:
                    problems.append(f"task '{t.id}' does not survive a JSON round trip (the run store writes it): {_exc(e)}")
                    break
            self.splits[split] = got
        shared = self._shared_with_train()
        if not problems and not self.splits.get("train"):
            problems.append("tasks('train') is empty: the seed pool and reset() without a task draw from it")
        if shared and not problems:
            raise _Failed(shared[0], "held-out splits must not share tasks with train: give their tasks ids of their own and "
                          "requests or starting states (payloads) no train task has", shared)
        problems.extend(shared)
        if problems:
            raise _Failed(problems[0], "tasks(split) must return a list of coevolve_sdk.Task records (not dicts) with distinct ids", problems)
        return ", ".join(f"{s}: {len(ts)} tasks" for s, ts in self.splits.items())

    def _shared_with_train(self) -> list[str]:
        """Tasks of another split that are also train tasks: the same id, or the same request
        (case and spacing aside) on the same payload. Evaluation on such a task measures recall
        of a seed task, not held-out success. Two tasks that share a request but start from
        different states (payloads) are different tasks."""
        train = self.splits.get("train", [])
        ids = {t.id for t in train}
        content = {(" ".join(t.query.lower().split()), json.dumps(t.payload, sort_keys=True, default=str)) for t in train}
        out: list[str] = []
        for split, ts in self.splits.items():
            if split == "train":
                continue
            same_id = [t.id for t in ts if t.id in ids]
            same = [t.id for t in ts if t.id not in ids
                    and (" ".join(t.query.lower().split()), json.dumps(t.payload, sort_keys=True, default=str)) in content]
            if same_id:
                out.append(f"tasks('{split}') shares {len(same_id)} task ids with train: {', '.join(same_id[:5])}")
            if same:
                out.append(f"tasks('{split}') has {len(same)} tasks with the request and payload of a train task: {', '.join(same[:5])}")
        return out

    def begin(self) -> str:
        bad: list[str] = []
        n = 0
        for split in self.splits:
            for t in self._tasks(split):
                n += 1
                try:
                    msgs = self.env.begin(t)
                except Exception as e:
                    bad.append(f"task '{t.id}': begin raised {_exc(e)}")
                    continue
                if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
                    bad.append(f"task '{t.id}': begin returned {_short(repr(msgs), 80)} ({type(msgs).__name__})")
                    continue
                try:
                    self.env.reset(seed=self.seed, options={"task": t})
                except Exception as e:
                    bad.append(f"task '{t.id}': reset raised {_exc(e)}")
        if bad:
            raise _Failed(f"{len(bad)} of {n} tasks cannot start an episode: {bad[0]}",
                          "begin(task) sets up the state from task.payload and returns [{'role': 'system', 'content': ...}, {'role': 'user', 'content': task.query}]; "
                          "check what the payload must hold", bad)
        return f"{n} tasks start"

    def replay(self) -> str:
        bad: list[str] = []
        n = 0
        for split in self.splits:
            for t in self._tasks(split):
                if not t.reference_actions:
                    continue
                n += 1
                r = self.env.replay(t, t.reference_actions)
                self.scores.append((f"replay of '{t.id}'", r.score))
                if r.errors:
                    bad.append(f"task '{t.id}' ({split}): a reference action failed: {_short(r.errors[0], 200)}")
                elif not r.success:
                    bad.append(f"task '{t.id}' ({split}): the replay scores {r.score:.2f}, below the success threshold {self.env.success_threshold}")
        if bad:
            raise _Failed(f"{len(bad)} of {n} tasks do not replay to success: {bad[0]}",
                          "a task's reference_actions must solve it: fix the task (or how its expected result is computed), "
                          "or the tool that fails", bad)
        return f"{n} tasks replay to success"

    def sample_action(self) -> str:
        bad: list[str] = []
        n = 0
        train = self._tasks("train")[:8]
        for k, t in enumerate(train):
            self.env.reset(seed=self.seed + k, options={"task": t})
            for _ in range(self.sample_steps):
                if self.env.done:
                    break
                a = self.env.sample_action()
                if not isinstance(a, str):
                    raise _Failed(f"sample_action() returned {type(a).__name__}", "return the action's text, e.g. coevolve_sdk.env.actions.format_tool_call(name, args)")
                n += 1
                _, reward, _, _, info = self.env.step(a)
                self.scores.append((f"sampled episode of '{t.id}'", reward))
                if info.get("error"):
                    bad.append(f"on task '{t.id}': {_short(a, 100)} -> {_short(info['error'], 160)}")
        if len(bad) > self.max_sample_error_rate * n:
            raise _Failed(f"{len(bad)} of {n} sampled actions were rejected by the environment: {bad[0]}",
                          "sample_action() must draw only actions that are valid in the live state (e.g. keys that exist): "
                          "draw arguments from the state (ToolEnv: Annotated[..., from_state(...)])", bad)
        return f"{n - len(bad)} of {n} sampled actions executed without an error"

    def synthetic(self) -> str:
        from coevolve_sdk.evolution.teacher import RandomExplorer
        from coevolve_sdk.evolution.validation import Validator

        train = self._tasks("train")[:5]
        # Keep the explored sequences short enough for an episode (one action spare for a
        # closing message that make_task may add), as a run's teacher options should.
        limit = int(getattr(self.env.options, "max_steps", 30))
        longest = max(3, min(8, limit - 1))
        teacher = RandomExplorer(RandomExplorer.Options(max_actions=longest, steps_per_round=max(longest, 6)))
        existing = {t.fingerprint() for ts in self.splits.values() for t in ts}
        candidates = teacher.seed_tasks(self.env, train, n=4, existing=existing, seed=self.seed)
        if not candidates:
            raise _Failed("the random explorer made no candidate task (it needs 3 or more sampled actions in a row that succeed)",
                          "make sample_action() draw valid actions, and let an episode last at least 3 actions (options.max_steps)")
        reasons: list[str] = []
        by_id = {t.id: t for t in train}
        for c in candidates:
            verdict, _ = Validator().validate(self.factory(), c, by_id.get(c.parent_task_id or ""), existing)
            if verdict.accepted:
                return f"{c.query[:80]!r} validated ({verdict.reason})"
            reasons.append(f"{_short(c.query, 80)}: {verdict.reason}")
        raise _Failed(f"none of {len(candidates)} explored tasks validates: {reasons[0]}",
                      "make_task(candidate, base) must instantiate the candidate on its parent's state so that replaying its "
                      "reference actions succeeds (ToolEnv's default does this by state comparison)", reasons)

    def determinism(self) -> str:
        task = self._tasks("train")[0]

        def episode(with_task: bool) -> list[tuple[str, str, float]]:
            env = self.factory()
            obs, info = env.reset(seed=self.seed + 11, options={"task": task} if with_task else None)
            trace = [("reset", obs, 0.0)]
            for _ in range(self.sample_steps):
                if env.done:
                    break
                a = env.sample_action()
                obs, r, _, _, _ = env.step(a)
                trace.append((a, obs, float(r)))
            return trace

        for with_task in (True, False):
            a, b = episode(with_task), episode(with_task)
            if a != b:
                i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y) if any(x != y for x, y in zip(a, b)) else min(len(a), len(b))
                what = "reset(seed=s, options={'task': t})" if with_task else "reset(seed=s)"
                x = a[i] if i < len(a) else None
                y = b[i] if i < len(b) else None
                raise _Failed(f"two episodes after {what} differ at step {i}: {_short(x)} vs {_short(y)}",
                              "draw all randomness from self.np_random (seeded by reset) and build the state only from the task")
        return "same seed, same episode"

    def malformed_contract(self) -> str:
        actions = malformed_actions(self.env.tools(), n=self.malformed, seed=self.seed)
        train = self._tasks("train")
        bad: list[str] = []
        errors = 0
        self.env.reset(seed=self.seed, options={"task": train[0]})
        for i, a in enumerate(actions):
            if self.env.done:
                self.env.reset(seed=self.seed + i, options={"task": train[i % len(train)]})
            try:
                obs, reward, term, trunc, info = self.env.step(a)
            except (GraderError, ToolReturnTypeError):
                raise
            except Exception as e:
                bad.append(f"step({_short(repr(a), 60)}) raised {_exc(e)}")
                self.env.reset(seed=self.seed + i, options={"task": train[i % len(train)]})
                continue
            if info.get("traceback") or info.get("tool_bugs"):
                what = "a tool raised" if info.get("tool_bugs") else "act() raised"
                first = (info.get("tool_bugs") or [info.get("error", "")])[0].splitlines()[0]
                bad.append(f"{what} on {_short(repr(a), 60)}: {_short(first, 160)}")
            if not isinstance(obs, str):
                bad.append(f"step({_short(repr(a), 60)}) observed {type(obs).__name__}, not str")
            self.scores.append((f"malformed action {i}", reward))
            errors += bool(info.get("error"))
        if bad:
            raise _Failed(f"{len(bad)} of {len(actions)} malformed actions were not handled: {bad[0]}",
                          "act() must catch bad agent output and report it with Outcome.error and an error message "
                          "(ToolEnv: raise ToolError in a tool for the agent's mistakes)", bad)
        return f"{len(actions)} malformed actions, {errors} error observations, no exception"

    def scores_contract(self) -> str:
        bad = [f"{where}: {s!r}" for where, s in self.scores if not (isinstance(s, (int, float)) and 0.0 <= float(s) <= 1.0)]
        if bad:
            raise _Failed(f"{len(bad)} scores outside [0, 1]: {bad[0]}", "score() must return a float in [0, 1]", bad)
        if not self.scores:
            raise _Failed("no score was observed (no replay or episode ran)", "give the train split tasks with reference actions")
        return f"{len(self.scores)} scores in [0, 1]"


def check_env(
    env: AgentEnv | type[AgentEnv],
    options: BaseModel | dict[str, Any] | None = None,
    *,
    splits: list[str] | None = None,
    seed: int = 0,
    malformed: int = 300,
    max_tasks: int | None = None,
    sample_steps: int = 6,
    max_sample_error_rate: float = 0.1,
    raise_on_failure: bool = True,
) -> CheckReport:
    """Check every contract of an environment class (or instance) and return the report.

    ``splits``: the splits whose tasks are checked (default: train, and test when the
    environment has one). ``max_tasks``: check at most this many tasks per split (default:
    all). ``malformed``: how many malformed actions to try. ``max_sample_error_rate``: the
    share of sampled actions the environment may reject (a stateful world can refuse a
    plausible call; the explorer drops those) before ``sample_action`` fails. Raises :class:`EnvCheckError`
    (an ``AssertionError``, so pytest shows the report) when a contract fails, unless
    ``raise_on_failure=False``.
    """
    cls = env if isinstance(env, type) else type(env)
    label = getattr(cls, "name", "") or cls.__name__
    if isinstance(env, type):
        opts = options
    else:
        opts = options if options is not None else env.options

    def factory() -> AgentEnv:
        return cls(opts) if opts is not None else cls()

    instance: AgentEnv | None = None if isinstance(env, type) else env
    checker: _Checker
    if instance is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                instance = factory()
        except Exception as e:
            report = CheckReport(env=label, results=[ContractResult(
                name="construct", status="failed", message=f"{cls.__name__}(options) raised {_exc(e)}",
                fix="the environment must build from its Options alone (expensive set-up can wait for the first reset)")])
            for name in list(CONTRACTS)[1:]:
                report.results.append(ContractResult(name=name, status="skipped", message="needs construct to pass first"))
            if raise_on_failure:
                raise EnvCheckError(report) from None
            return report
    checker = _Checker(factory, instance, label, splits, seed, malformed, max_tasks, sample_steps, max_sample_error_rate)
    checker.report.results.append(ContractResult(name="construct", status="passed", message=f"{cls.__name__} built"))
    checker.run("gymnasium", checker.gymnasium)
    checker.run("tools", checker.tools)
    checker.run("tasks", checker.tasks)
    checker.run("begin", checker.begin, needs=["tasks"])
    checker.run("replay", checker.replay, needs=["begin"])
    checker.run("sample_action", checker.sample_action, needs=["begin"])
    checker.run("synthetic", checker.synthetic, needs=["begin", "replay"])
    checker.run("determinism", checker.determinism, needs=["begin"])
    checker.run("malformed", checker.malformed_contract, needs=["begin", "tools"])
    checker.run("scores", checker.scores_contract, needs=["begin"])
    order = list(CONTRACTS)
    checker.report.results.sort(key=lambda r: order.index(r.name))
    if raise_on_failure and not checker.report.ok:
        raise EnvCheckError(checker.report)
    return checker.report
