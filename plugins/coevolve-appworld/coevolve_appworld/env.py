"""AppWorldEnv: AppWorld tasks as a CoEvolve ``AgentEnv`` (``coevolve/appworld-v0``).

The agent writes Python; each action's code runs in the episode's world (a worker process, see
``pool.py``) with ``apis`` predefined, and the observation is what it printed or the error.
The episode ends when the code calls ``apis.supervisor.complete_task(...)`` or after
``max_steps`` actions. Benchmark tasks are graded by AppWorld's own evaluation (task goal
completion); synthetic tasks by comparing the world's changes with the reference's
(``grading.py``).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from coevolve_sdk import (
    AgentEnv,
    CandidateTask,
    EnvOptions,
    Outcome,
    Step,
    Task,
    ToolSpec,
    Trajectory,
)

from .code import (
    TOOL_NAME,
    NoCodeError,
    api_calls,
    call_arguments,
    describe_call,
    extract_code,
    fence,
)
from .grading import GradeReport, grade_outcome
from .pool import (
    PoolExhausted,
    Worker,
    WorkerError,
    WorkerFailure,
    WorkerPool,
    shared_pool,
)
from .runtime import SPLITS, Runtime, load_runtime

__all__ = ["AppWorldEnv", "AppWorldOptions"]

# Account life-cycle APIs: calling them at random breaks the world for everything after.
_SAMPLE_SKIP = {"signup", "delete_account", "login", "logout", "send_verification_code", "verify_account",
                "send_password_reset_code", "reset_password", "update_account_name", "complete_task"}
_WORDS = ["Sunday", "Harbor", "Maple", "Quiet", "Orbit", "Lemon", "Atlas", "Velvet", "Cedar", "Signal", "Meadow", "Copper"]
_ID_IN_OUTPUT = re.compile(r'"(\w+_id|id)":\s*(\d+)')


class AppWorldOptions(EnvOptions):
    home: str | None = Field(None, description="Runtime folder made by `coevolve appworld setup` (default: $COEVOLVE_APPWORLD_HOME or ~/.cache/coevolve/appworld-<version>).")
    max_workers: int = Field(16, ge=1, description="Worker processes (= worlds alive at once) at most.")
    execution_timeout: int = Field(30, ge=1, description="Seconds one action's code may run (AppWorld's own alarm in the worker).")
    request_grace: float = Field(30.0, ge=1.0, description="Extra seconds before a worker that has not answered is declared hung and killed.")
    memory_mb: int = Field(4096, ge=0, description="Address-space limit per worker process in MiB (RLIMIT_AS); 0 = none.")
    max_output_chars: int = Field(6000, ge=200, description="Longer execution output is cut (the agent is told).")
    api_docs: Literal["names", "descriptions"] = Field("descriptions", description="How much of each app's API list the opening prompt shows.")
    prompt_apps: Literal["accounts", "all"] = Field("accounts", description="Apps listed in the prompt: those the supervisor has accounts in, or all.")


SYSTEM_PROMPT = """You are an assistant that completes tasks for your supervisor by writing Python code that calls app APIs.
Each of your messages must contain one ```python fenced block (or an {tool} tool call); it runs in a persistent Python session and you see what it prints.
- Call APIs as apis.<app>.<api>(**kwargs); every call returns JSON-like data. Print what you need to see.
- Look up an API before using it: apis.api_docs.show_api_doc(app_name=..., api_name=...). apis.api_docs.show_api_descriptions(app_name=...) lists an app's APIs.
- Most app APIs need an access_token from apis.<app>.login(username=<email>, password=<password>); the passwords are in apis.supervisor.show_account_passwords().
- Files, networking and system modules are not available. Each execution is limited to {timeout} seconds.
- When the task is done, call apis.supervisor.complete_task(answer=<answer>) (omit answer when the task asks for none). That ends the episode."""


@lru_cache(maxsize=64)
def _load_docs(path: str, mtime: float) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


class AppWorldEnv(AgentEnv):
    """AppWorld tasks run in isolated worker processes; see the module docstring."""

    name = "appworld"
    version = 0
    Options = AppWorldOptions
    # each instance holds its own worker process and only waits on it over HTTP; the pool that
    # lends workers is locked, so episodes can be stepped from several threads at once
    concurrent_steps = True

    def __init__(self, options: AppWorldOptions | dict[str, Any] | None = None, render_mode: str | None = None, **kwargs: Any):
        super().__init__(options, render_mode, **kwargs)
        self.options: AppWorldOptions
        self._runtime: Runtime | None = None
        self._pool: WorkerPool | None = None
        self._worker: Worker | None = None
        self._world: dict[str, Any] = {}
        self._broken: str | None = None
        self._completed = False
        self._grade: tuple[int, GradeReport] | None = None
        self.last_grade: GradeReport | None = None

    # ------------------------------------------------------------ runtime and workers
    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = load_runtime(self.options.home)
        return self._runtime

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = shared_pool(self.runtime, max_workers=self.options.max_workers, memory_mb=self.options.memory_mb)
        return self._pool

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            self._worker = self.pool.acquire()
        return self._worker

    def _replace_worker(self) -> None:
        if self._worker is not None:
            old, self._worker = self._worker, None
            self.pool.discard(old)

    def _call(self, path: str, body: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        t = timeout if timeout is not None else self.options.execution_timeout + self.options.request_grace
        return self.worker.call(path, body, timeout=t)

    def close(self) -> None:
        if self._worker is not None and self._pool is not None:
            try:
                if self._worker.alive():
                    self._worker.call("/close", timeout=30)
            except (WorkerError, WorkerFailure):
                pass
            self._pool.release(self._worker)
        self._worker = None
        super().close()

    # ------------------------------------------------------------ tasks
    def splits(self) -> list[str]:
        ds = self.runtime.data_dir / "datasets"
        found = sorted(p.stem for p in ds.glob("*.txt")) if ds.is_dir() else []
        return found

    def tasks(self, split: str = "train") -> list[Task]:
        data = self.runtime.data_dir
        path = data / "datasets" / f"{split}.txt"
        if not path.exists():
            available = ", ".join(self.splits()) or "none"
            known = "" if split in SPLITS else f" (AppWorld's splits are {', '.join(SPLITS)})"
            raise ValueError(f"AppWorld split '{split}' has no task list under {data}{known}; available: {available}")
        out: list[Task] = []
        for task_id in [line.strip() for line in path.read_text().splitlines() if line.strip()]:
            tdir = data / "tasks" / task_id
            specs = json.loads((tdir / "specs.json").read_text())
            ref = tdir / "ground_truth" / "coevolve_reference.py"
            out.append(Task(
                id=f"appworld-{task_id}", env=self.name, query=specs["instruction"], origin="benchmark", split=split,
                payload={"task_id": task_id, "scenario": task_id.rsplit("_", 1)[0]},
                reference_actions=[fence(ref.read_text())] if ref.exists() else [],
            ))
        return out

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(
            name=TOOL_NAME,
            description="Run Python code in the AppWorld session (apis is predefined) and return what it printed.",
            parameters={"type": "object", "properties": {"code": {"type": "string", "description": "Python code to run."}},
                        "required": ["code"]},
        )]

    # ------------------------------------------------------------ episodes
    def _open(self, task: Task) -> dict[str, Any]:
        task_id = task.payload.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise ValueError(f"task {task.id} has no payload['task_id'] naming an AppWorld task")
        body = {"task_id": task_id, "experiment": f"coevolve-{os.getpid()}-{uuid.uuid4().hex[:10]}",
                "timeout_seconds": self.options.execution_timeout, "snapshot": bool(task.payload.get("synthetic"))}
        last: Exception | None = None
        for _ in range(2):  # a worker that died since its last episode is replaced once
            try:
                return self._call("/open", body, timeout=120 + self.options.request_grace)
            except WorkerError as e:
                last = e
                self._replace_worker()
        raise WorkerError(f"could not open AppWorld task {task_id}: {last}")

    def begin(self, task: Task) -> list[dict[str, Any]]:
        self._broken = None
        self._completed = False
        self._grade = None
        self.last_grade = None
        self._world = self._open(task)
        return [{"role": "system", "content": SYSTEM_PROMPT.format(tool=TOOL_NAME, timeout=self.options.execution_timeout)},
                {"role": "user", "content": self._task_prompt(task)}]

    def _task_prompt(self, task: Task) -> str:
        w = self._world
        sup = w["supervisor"]
        apps = [a for a in w["allowed_apps"] if a not in ("api_docs", "admin")]
        if self.options.prompt_apps == "accounts":
            apps = [a for a in apps if a in w["accounts"] or a == "supervisor"]
        lines = [f"Supervisor: {sup['first_name']} {sup['last_name']} (email {sup['email']}, phone {sup['phone_number']}).",
                 f"Date and time in the world: {w['datetime']}.", "", "Apps and their APIs:"]
        for app in apps:
            lines.append(f"- {app}: {w['app_descriptions'].get(app, '')}")
            docs = self._docs(app)
            if self.options.api_docs == "names":
                lines.append("  " + ", ".join(docs))
            else:
                for api, d in docs.items():
                    lines.append(f"  - {api}: {str(d.get('description', '')).strip()[:160]}")
        lines += ["", f"Task: {task.query}"]
        return "\n".join(lines)

    def _docs(self, app: str) -> dict[str, Any]:
        path = self.runtime.data_dir / "api_docs" / "standard" / f"{app}.json"
        if not path.exists():
            return {}
        return _load_docs(str(path), path.stat().st_mtime)

    def act(self, action: str) -> Outcome:
        if self._broken:
            return Outcome(messages=[{"role": "user", "content": self._broken}], done=True, error=self._broken)
        try:
            code = extract_code(action)
        except NoCodeError as e:
            return Outcome(messages=[{"role": "user", "content": str(e)}], error=str(e))
        names = api_calls(code)
        try:
            res = self._call("/execute", {"code": code})
        except (WorkerError, WorkerFailure) as e:
            # The world is lost (worker crashed, hung past its deadline, or AppWorld failed):
            # this episode ends with score 0; the next episode gets a fresh worker.
            self._broken = f"The environment failed while running this code and the episode was ended: {e}"
            if isinstance(e, WorkerError) or (self._worker is not None and not self._worker.alive()):
                self._replace_worker()
            return Outcome(messages=[{"role": "user", "content": self._broken}], done=True, tool_names=names,
                           error=self._broken, info={"worker_failure": True})
        output = str(res.get("output", ""))
        if len(output) > self.options.max_output_chars:
            output = output[: self.options.max_output_chars] + f"\n[... output cut at {self.options.max_output_chars} characters]"
        self._completed = bool(res.get("completed"))
        failed = output.startswith("Execution failed")
        return Outcome(messages=[{"role": "user", "content": output}], done=self._completed, tool_names=names,
                       error=output[:500] if failed else None, info={"completed": self._completed})

    def score(self) -> float:
        if self.task is None:
            return 0.0
        if self._broken:
            self.last_grade = GradeReport(score=0.0, failures=[self._broken])
            return 0.0
        if self._grade is not None and self._grade[0] == len(self.steps):
            return self._grade[1].score
        try:
            if self.task.payload.get("synthetic"):
                reference = self.task.payload.get("reference_outcome")
                if not isinstance(reference, dict):
                    raise ValueError("synthetic task has no reference_outcome; build it with make_task()")
                report = grade_outcome(reference, self._call("/outcome"))
            else:
                ev = self._call("/evaluate", timeout=120 + self.options.request_grace)
                report = GradeReport(score=1.0 if ev.get("success") else 0.0,
                                     passes=[p.get("requirement", "") for p in ev.get("passes", [])],
                                     failures=[f.get("requirement", "") for f in ev.get("failures", [])])
        except (WorkerError, WorkerFailure, ValueError) as e:
            report = GradeReport(score=0.0, failures=[f"grading failed: {e}"])
            if isinstance(e, WorkerError):
                self._replace_worker()
        self._grade = (len(self.steps), report)
        self.last_grade = report
        return report.score

    # ------------------------------------------------------------ CoEvolve extras
    def action_pattern(self, trajectory: Trajectory) -> str:
        """The ordered ``app.api`` names the trajectory's code calls (read with ``ast``)."""
        names: list[str] = []
        for s in trajectory.steps:
            try:
                names.extend(api_calls(extract_code(s.action)))
            except NoCodeError:
                continue
        return ">".join(names)

    def make_task(self, candidate: CandidateTask, base: Task | None) -> Task:
        """A synthetic task on ``base``'s world: runs the reference code in a fresh world and
        records what it changed and answered, which later episodes are graded against."""
        if base is None or not base.payload.get("task_id"):
            raise ValueError("an AppWorld synthetic task needs a base AppWorld task (its world)")
        task = Task(env=self.name, query=candidate.query, origin="synthetic", split="train",
                    payload={"task_id": base.payload["task_id"], "scenario": base.payload.get("scenario"), "synthetic": True},
                    reference_actions=list(candidate.reference_actions))
        self.reset(options={"task": task})
        for i, a in enumerate(candidate.reference_actions):
            _, _, _, _, info = self.step(a)
            if info.get("error"):
                raise ValueError(f"reference action {i + 1} failed: {str(info['error'])[:300]}")
            if self.done and i + 1 < len(candidate.reference_actions):
                raise ValueError(f"the episode ended after reference action {i + 1} of {len(candidate.reference_actions)}")
        outcome = self._call("/outcome")
        if not outcome.get("changes") and outcome.get("answer") is None:
            raise ValueError("the reference code neither changes the world nor answers; there is nothing to grade")
        task.payload["reference_outcome"] = {"changes": outcome["changes"], "answer": outcome.get("answer")}
        return task

    def describe(self, task: Task | None, steps: list[Step]) -> str:
        parts: list[str] = []
        for s in steps:
            try:
                code = extract_code(s.action)
            except NoCodeError:
                continue
            for name, args in call_arguments(code):
                app, api = name.split(".", 1)
                if app == "supervisor" or api == "login":
                    continue
                parts.append(describe_call(name, args))
        if not parts:
            return super().describe(task, steps)
        return "Please " + "; then ".join(parts) + ". Call apis.supervisor.complete_task() when you are done."

    def sample_action(self) -> str:
        """A call of a random API of an app the supervisor has an account in, with plausible
        arguments (known ids from earlier outputs, short words, allowed enum values)."""
        if not self._world:
            raise RuntimeError("call reset() before sample_action()")
        rng = self.np_random
        apps = [a for a in self._world.get("accounts", []) if self._docs(a)]
        if not apps:
            return fence("print(apis.supervisor.show_profile())")
        app = apps[int(rng.integers(0, len(apps)))]
        docs = self._docs(app)
        choices = [d for d in docs.values() if d["api_name"] not in _SAMPLE_SKIP]
        weights = [2.0 if d.get("method", "GET") != "GET" else 1.0 for d in choices]
        total = sum(weights)
        d = choices[int(rng.choice(len(choices), p=[w / total for w in weights]))]
        seen_ids = [int(m.group(2)) for s in self.steps for m in _ID_IN_OUTPUT.finditer(s.observation)]
        args: list[str] = []
        needs_token = False
        for p in d.get("parameters", []):
            pname = p["name"]
            if pname == "access_token":
                needs_token = True
                args.append(f"access_token={app}_access_token")
                continue
            if not p.get("required") and rng.random() < 0.7:
                continue
            args.append(f"{pname}={self._plausible(p, seen_ids)!r}")
        token = ""
        if needs_token:
            token = (f"try:\n    {app}_access_token\nexcept NameError:\n"
                     f"    _passwords = {{r['account_name']: r['password'] for r in apis.supervisor.show_account_passwords()}}\n"
                     f"    {app}_access_token = apis.{app}.login(username=apis.supervisor.show_profile()['email'], "
                     f"password=_passwords[{app!r}])['access_token']\n")
        return fence(token + f"print(apis.{app}.{d['api_name']}({', '.join(args)}))")

    def _plausible(self, p: dict[str, Any], seen_ids: list[int]) -> Any:
        rng = self.np_random
        name, typ = p["name"], p.get("type", "string")
        for c in p.get("constraints", []):
            m = re.match(r"value in \[(.*)\]", c)
            if m:
                options = [o.strip().strip("'\"") for o in m.group(1).split(",") if o.strip()]
                if options:
                    return options[int(rng.integers(0, len(options)))]
        if p.get("default") is not None and rng.random() < 0.3:
            return p["default"]
        if typ == "integer":
            if name.endswith("_id") or name == "id":
                pool = seen_ids or [1, 2, 3]
                return int(pool[int(rng.integers(0, len(pool)))])
            return int(rng.integers(1, 6))
        if typ == "number":
            return float(round(float(rng.uniform(1, 50)), 2))
        if typ == "boolean":
            return bool(rng.random() < 0.5)
        if typ in ("array", "list"):
            return []
        if "email" in name:
            return self._world["supervisor"]["email"]
        w1, w2 = (_WORDS[int(i)] for i in rng.integers(0, len(_WORDS), size=2))
        if name in ("content", "description", "body", "message", "comment"):
            return f"{w1} notes about {w2.lower()}"
        return f"{w1} {w2}"


