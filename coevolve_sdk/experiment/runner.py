"""Running every arm × seed of an experiment as ``coevolve run`` subprocesses.

Each run is an ordinary run folder, so the runner keeps no state of its own: what is finished,
what can be resumed and what must start is read from the run folders every time, and a
rerun after a crash, a Ctrl-C or a failure does only the work that is left. Runs go in
parallel processes (``--jobs``) with the machine's cores split between them, since torch
would otherwise start one thread per core in every process and they would fight.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, Literal

import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coevolve_sdk.storage.diskspace import EXIT_DISK_FULL
from coevolve_sdk.config import RunConfig
from coevolve_sdk.errors import CoEvolveError, ConfigError
from coevolve_sdk.experiment.runs import run_status
from coevolve_sdk.experiment.spec import Experiment, differences, plan_record

__all__ = ["Job", "RunnerResult", "plan_jobs", "run_experiment", "threads_per_job", "ExperimentLock"]

STOP_GRACE_S = 60.0  # how long stopped runs get to record their interrupt before they are killed


def threads_per_job(jobs: int) -> int:
    """The cores this process may use, split between ``jobs`` runs (at least one each)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, jobs))


@dataclass
class Job:
    arm: str
    seed: int
    run_dir: Path
    config_path: Path
    action: Literal["fresh", "resume", "skip"]
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    started: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.arm}/seed-{self.seed}"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "run.log"


@dataclass
class RunnerResult:
    finished: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (label, why, with the log's path)
    stopped: list[str] = field(default_factory=list)
    interrupted: bool = False
    disk_full: bool = False  # a run stopped for lack of room: no further run is started

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else EXIT_DISK_FULL if self.disk_full else (1 if self.failed or self.stopped else 0)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def plan_jobs(exp: Experiment) -> list[Job]:
    """What each arm × seed needs, read from its run folder: skip (finished), resume (a run
    that started and stopped) or fresh. Refuses run folders made from a different config."""
    jobs, changed = [], []
    for arm in exp.arms:
        for seed in exp.spec.seeds:
            run_dir = exp.run_dir(arm.name, seed)
            status = run_status(run_dir)
            has_config = (run_dir / "config.yaml").exists()
            action: Literal["fresh", "resume", "skip"] = (
                "skip" if status == "finished" else "resume" if status is not None and has_config else "fresh")
            if has_config:
                diff = _config_change(run_dir / "config.yaml", exp.config(arm, seed))
                if diff:
                    changed.append(f"{arm.name}/seed-{seed}: {diff}")
            jobs.append(Job(arm.name, seed, run_dir, exp.out / "configs" / arm.name / f"seed-{seed}.yaml", action))
    if changed:
        raise ConfigError(
            f"{exp.source}: some runs in {exp.out} were made with a different config than the experiment file gives now:\n  - "
            + "\n  - ".join(changed)
            + "\nMixing them would compare different things. Restore the experiment file, or delete those run folders "
              "(or use another --dir) to run them again."
        )
    return jobs


def _config_change(existing: Path, planned: RunConfig) -> str:
    try:
        old = RunConfig.model_validate(yaml.safe_load(existing.read_text()))
    except (yaml.YAMLError, ValidationError, TypeError) as e:
        return f"its config.yaml cannot be read ({type(e).__name__})"
    diff = differences(old, planned)
    return ", ".join(f"{k} was {json.dumps(v['base'], default=str)[:40]}, now {json.dumps(v['arm'], default=str)[:40]}"
                     for k, v in list(diff.items())[:4]) + (" ..." if len(diff) > 4 else "")


class ExperimentLock:
    """One runner per experiment folder: two would start the same runs twice. An OS lock
    (flock), so it is released the moment its process dies, however it dies."""

    def __init__(self, out: Path) -> None:
        self.path = out / ".runner.lock"
        self._fd: int | None = None

    def __enter__(self) -> "ExperimentLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise CoEvolveError(
                f"another `coevolve experiment` is running in {self.path.parent} (pid {holder}). Wait for it to finish or "
                f"stop it (Ctrl-C in its terminal, or kill -INT {holder}); `coevolve experiment summarize` reads a folder "
                f"while it runs."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Display:
    """A bar on a terminal, timestamped lines elsewhere (CI logs, files)."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.t0 = time.perf_counter()
        self.bar: Progress | None = None
        if console.is_terminal:
            self.bar = Progress(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[state]}"),
                                TimeElapsedColumn(), console=console, transient=False)
            self.task = self.bar.add_task("runs", total=total, state="")
            self.bar.start()

    def line(self, message: str) -> None:
        self.console.print(f"[{time.perf_counter() - self.t0:7.1f}s] {message}", markup=False, highlight=False)

    def update(self, done: int, running: int, left: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, state=f"{running} running, {left} left")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class _Signals:
    """SIGINT/SIGTERM set a flag the loop acts on (stop the runs; a second one kills them)."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def __enter__(self) -> "_Signals":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)


def _child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
                "COEVOLVE_EXPERIMENT_PARENT": str(os.getpid())})
    return env


def _start(job: Job, env: dict[str, str]) -> None:
    if job.action == "resume":
        args = ["run", "--resume", str(job.run_dir)]
    else:
        args = ["run", str(job.config_path)]
    cmd = [sys.executable, "-m", "coevolve_sdk.cli.child", *args]
    job.run_dir.mkdir(parents=True, exist_ok=True)
    job.log = open(job.log_path, "ab")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    job.log.write(f"\n=== coevolve experiment {stamp}: {job.action} run, threads {env['OMP_NUM_THREADS']}: coevolve {' '.join(args)}\n".encode())
    job.log.flush()
    job.started = time.perf_counter()
    job.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=job.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_bytes()[-4000:].decode(errors="replace")
    except OSError:
        return ""
    kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("=== coevolve experiment")]
    return " | ".join(ln.strip()[:200] for ln in kept[-lines:])


def _signal_group(job: Job, sig: int) -> None:
    if job.proc is not None and job.proc.poll() is None:
        try:
            os.killpg(job.proc.pid, sig)
        except ProcessLookupError:
            pass


def run_experiment(exp: Experiment, jobs: int, console: Console, continue_cmd: str) -> RunnerResult:
    """Run what is left of the experiment; returns what happened to each run."""
    with ExperimentLock(exp.out):
        planned = plan_jobs(exp)
        for arm in exp.arms:
            for seed in exp.spec.seeds:
                cfg = exp.config(arm, seed)
                _write(exp.out / "configs" / arm.name / f"seed-{seed}.yaml", yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        _write(exp.out / "experiment.json", json.dumps(plan_record(exp), indent=2))
        return _run(planned, jobs, console, continue_cmd)


def _run(planned: list[Job], jobs: int, console: Console, continue_cmd: str) -> RunnerResult:
    result = RunnerResult()
    threads = threads_per_job(jobs)
    env = _child_env(threads)
    display = _Display(console, total=len(planned))
    for job in planned:
        if job.action == "skip":
            result.skipped.append(job.label)
            display.line(f"{job.label}: skipped (finished before)")
    queue = deque(j for j in planned if j.action != "skip")
    running: list[Job] = []
    done = len(result.skipped)
    display.line(f"{len(planned)} runs: {done} finished before, {len(queue)} to run, {jobs} at a time with {threads} torch thread(s) each")

    def progress() -> str:
        display.update(done, len(running), len(queue))
        return f"{done}/{len(planned)} done, {len(running)} running, {len(queue)} left"

    def reap(job: Job, rc: int, stopping: bool) -> None:
        nonlocal done
        assert job.log is not None
        job.log.close()
        running.remove(job)
        took = time.perf_counter() - job.started
        status = run_status(job.run_dir)
        if status == "finished":
            # the store says finished once the final evaluation is in; a stop or crash after
            # that (while writing the report) loses nothing that the summary reads
            done += 1
            result.finished.append(job.label)
            late = "" if rc == 0 else f"; it stopped while writing its report (exit {rc}): `coevolve report {job.run_dir}` writes it"
            display.line(f"{job.label}: finished in {took:.0f}s{late} ({progress()})")
        elif stopping:
            result.stopped.append(job.label)
            display.line(f"{job.label}: stopped after {took:.0f}s; it resumes on the next run of the experiment")
        else:
            done += 1
            why = f"exit status {rc}" if rc != 0 else f"exited 0 but its status is '{status}'"
            if rc == EXIT_DISK_FULL:
                result.disk_full = True
                why = (f"the disk is full (exit {rc}); free space and run the experiment again, which resumes it exactly "
                       f"and starts the runs left")
            tail = _log_tail(job.log_path)
            result.failed.append((job.label, f"{why}; log: {job.log_path}" + (f" (last lines: {tail})" if tail else "")))
            display.line(f"{job.label}: FAILED ({why}) after {took:.0f}s; its log: {job.log_path} ({progress()})")

    try:
        with _Signals() as sigs:
            while (running or (queue and not result.disk_full)) and sigs.count == 0:
                while queue and len(running) < jobs and sigs.count == 0 and not result.disk_full:
                    job = queue.popleft()
                    _start(job, env)
                    running.append(job)
                    display.line(f"{job.label}: started ({'resumed' if job.action == 'resume' else 'new run'}; {progress()})")
                for job in list(running):
                    rc = job.proc.poll() if job.proc is not None else None
                    if rc is not None:
                        reap(job, rc, stopping=False)
                time.sleep(0.2)
            if sigs.count:
                result.interrupted = True
                display.line(f"interrupted: stopping {len(running)} running run(s) (Ctrl-C again to kill them at once)")
                for job in running:
                    _signal_group(job, signal.SIGINT)
                deadline = time.monotonic() + STOP_GRACE_S
                killed = False
                while running:
                    if not killed and (sigs.count > 1 or time.monotonic() > deadline):
                        for job in running:
                            _signal_group(job, signal.SIGKILL)
                        killed = True
                    for job in list(running):
                        rc = job.proc.poll() if job.proc is not None else None
                        if rc is not None:
                            reap(job, rc, stopping=True)
                    time.sleep(0.1)
    finally:
        # an unexpected error in this loop must not leave runs behind: stop them as Ctrl-C would
        for job in running:
            _signal_group(job, signal.SIGINT)
        display.close()
    if result.disk_full:
        for job in queue:  # every run writes the same disk: they would stop the same way
            result.stopped.append(job.label)
            display.line(f"{job.label}: not started: the disk is full")
    if result.interrupted:
        console.print(f"Interrupted. Finished runs are kept and stopped runs resume where they stopped; continue with:\n  {continue_cmd}",
                      markup=False, highlight=False)
    return result
