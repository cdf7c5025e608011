"""`coevolve experiment` end to end, as a user runs it: a reduced experiment (2 arms × 2 seeds,
a few steps of the kvstore example, --jobs 2) is stopped with Ctrl-C, started again and killed
with SIGKILL, then rerun to the end. Stopped runs must not keep running, finished runs must be
skipped untouched, and the summary must hold every arm and seed with finite statistics."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.experiment.runner import threads_per_job
from coevolve_sdk.experiment.runs import read_run, run_status
from coevolve_sdk.experiment.spec import set_dotted
from tests.conftest import REPO, coevolve_cmd

SMALL = {"training.steps": 2, "training.tasks_per_step": 2, "rollout.group_size": 2, "training.checkpoint_every": 1,
         "algorithm.options.warm_start.steps": 5, "eval.max_tasks": 2, "eval.every": 1, "evolution.every": 1, "pool.seed_tasks": 8}
ARMS, SEEDS = ["static", "coevolve"], [0, 1]


def children_of(out: Path) -> dict[int, str]:
    """Runs started for this experiment that are still alive: pid -> 'arm/seed-N'."""
    found = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                args = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")
                state = next((ln for ln in (d / "status").read_text().splitlines() if ln.startswith("State:")), "")
            except OSError:
                continue
            if "coevolve_sdk.cli.child" in args and "zombie" not in state:
                target = next((Path(a) for a in args if a.startswith(str(out))), None)
                if target is not None:  # OUT/configs/ARM/seed-N.yaml or OUT/runs/ARM/seed-N
                    found[int(d.name)] = f"{target.parent.name}/{target.name.removesuffix('.yaml')}"
    return found


def wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def run_dirs(out: Path) -> list[Path]:
    return [out / "runs" / a / f"seed-{s}" for a in ARMS for s in SEEDS]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the runs' processes through /proc (Linux)")
def test_interrupted_and_killed_experiment_resumes_and_summarises(tmp_path: Path, sub_env: dict[str, str]) -> None:
    base = yaml.safe_load((REPO / "examples" / "kvstore-tiny.yaml").read_text())
    for k, v in SMALL.items():
        set_dotted(base, k, v)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    out = tmp_path / "out"
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"base": "base.yaml", "dir": str(out), "seeds": SEEDS, "baseline": "static",
                                   "arms": [{"name": a, "preset": a} for a in ARMS]}))
    cmd = [*coevolve_cmd(), "experiment", str(exp), "--jobs", "2"]

    # 1. Ctrl-C once the first run has finished: the runs in flight stop and record it, the
    #    runner says how to continue and exits 130
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=sub_env)
    def one_done_one_training() -> bool:
        alive = {out / "runs" / label for label in children_of(out).values()}
        status = {d: run_status(d) for d in run_dirs(out)}
        return (any(s == "finished" and d not in alive for d, s in status.items())
                and any(s == "running" and d in alive for d, s in status.items()))

    wait_for(lambda: one_done_one_training() or proc.poll() is not None, 600, "a finished run and one in training")
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, text
    assert "Interrupted." in text and f"coevolve experiment {exp} --jobs 2 --dir {out}" in text
    assert children_of(out) == {}, "a run kept running after the experiment was interrupted"
    finished = {d for d in run_dirs(out) if run_status(d) == "finished"}
    assert finished and len(finished) < 4
    stopped = [d for d in run_dirs(out) if d not in finished and run_status(d) is not None]
    assert stopped, text  # at least one run was under way and stopped
    for d in stopped:
        assert "Interrupted" in (d / "run.log").read_text().rsplit("=== coevolve experiment", 1)[-1], "a stopped run did not record its interrupt"

    # 2. start again and SIGKILL the runner while runs are in flight: they must not outlive it
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=sub_env)
    wait_for(lambda: len(children_of(out)) > 0 or proc.poll() is not None, 120, "a run to start")

    def started(label: str) -> bool:  # the run itself is under way (it logged past its header), not still starting Python
        log = out / "runs" / label / "run.log"
        return log.exists() and len(log.read_text().rsplit("=== coevolve experiment", 1)[-1].strip().splitlines()) > 1

    wait_for(lambda: bool(children_of(out)) and all(started(lb) for lb in children_of(out).values()) or proc.poll() is not None,
             120, "the runs in flight to get under way")
    in_flight = set(children_of(out).values())
    proc.send_signal(signal.SIGKILL)
    text2, _ = proc.communicate(timeout=60)
    assert "skipped (finished before)" in text2 and in_flight
    wait_for(lambda: children_of(out) == {}, 120, "the runs of a killed experiment to stop")
    for label in in_flight:  # stopped, not left to run on to the end without their experiment
        d = out / "runs" / label
        assert run_status(d) != "finished", f"{label} ran on after its experiment was killed"
        last_attempt = (d / "run.log").read_text().rsplit("=== coevolve experiment", 1)[-1]
        assert "Interrupted" in last_attempt, last_attempt[-2000:]

    # 3. rerun to the end: finished runs are skipped without touching their folders
    finished = {d for d in run_dirs(out) if run_status(d) == "finished"}
    before = {d: ((d / "run.log").stat(), (d / "run.sqlite").stat().st_mtime_ns, read_run(d).evals) for d in finished}
    done = subprocess.run(cmd, capture_output=True, text=True, env=sub_env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for d, (log, db_mtime, evals) in before.items():
        label = f"{d.parent.name}/{d.name}"
        assert f"{label}: skipped (finished before)" in done.stdout
        assert (d / "run.log").stat().st_size == log.st_size and (d / "run.log").stat().st_mtime_ns == log.st_mtime_ns
        assert (d / "run.sqlite").stat().st_mtime_ns == db_mtime and read_run(d).evals == evals
    assert all(run_status(d) == "finished" for d in run_dirs(out))
    assert "resumed" in done.stdout or len(finished) == 4

    # 4. the summary: every arm and seed, finite statistics, a paired difference to the baseline
    summary = json.loads((out / "summary.json").read_text())
    for arm in ARMS:
        a = summary[arm]
        assert set(a["seeds"]) == {"0", "1"} and a["n"] == 2
        assert all(math.isfinite(v) for v in [*a["seeds"].values(), a["mean"], a["std"], *a["ci95"]])
        assert a["curve"]["steps"] == [0, 1, 2]  # before, during (eval.every=1), after
    paired = summary["coevolve"]["paired_vs_baseline"]
    assert paired["baseline"] == "static" and paired["n"] == 2 and all(math.isfinite(x) for x in paired["ci95"])
    assert list(summary) == ARMS
    info = json.loads((out / "summary-info.json").read_text())
    assert info["runs"] == {f"{a}/seed-{s}": "finished" for a in ARMS for s in SEEDS}
    # what every run ran on (all on this machine): listed, each run under it
    from coevolve_sdk.storage.machine import machine_facts

    assert info["machines"] and all(m["facts"]["cpu"] == machine_facts()["cpu"] for m in info["machines"])
    assert {r for m in info["machines"] for r in m["runs"]} == set(info["runs"])
    # every attempt ran here with --jobs 2 (the same threads), resumed ones too: one machine, said once
    (only,) = info["machines"]
    assert f"Every run ({len(info['runs'])}) ran on one machine: {only['label']}." in (out / "summary.md").read_text()
    for name in ("summary.csv", "summary.md", "experiment.html", "plots/final.svg", "plots/curves.svg"):
        assert (out / name).stat().st_size > 0, name
    # each run is an ordinary run folder: the existing commands read it
    rep = subprocess.run([*coevolve_cmd(), "signals", str(out / "runs" / "coevolve" / "seed-0")], capture_output=True, text=True, env=sub_env, timeout=120)
    assert rep.returncode == 0, rep.stderr
    # torch threads split between the parallel runs
    assert f"threads {threads_per_job(2)}:" in (out / "runs" / "static" / "seed-0" / "run.log").read_text()
