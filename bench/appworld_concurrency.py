"""Rollout wall time on AppWorld's real workers: environment steps from N threads against one.

The core ``collect_groups`` rolls out every task of AppWorld's synthetic set (the one the tests
build) ``--group`` times with ``rollout.env_workers = N``; each episode holds its own worker
process (one world per process) and the policy replays the task's reference code one statement
per turn (``coevolve_appworld.testing.ScriptPolicy``), so nearly all of the time is the
environment side: opening worlds, executing code, grading. The baseline is N = 1 (episodes
stepped one after another), measured in the same run, interleaved with the others so that load
bursts hit every N. Workers are started by a first, untimed rollout.

Goal: speed-up >= 0.8 x N up to N = 4. On a machine with fewer cores than N the bound is CPU:
the script measures the CPU seconds of the SDK process and of every worker during the N = 1
rollouts and prints the ceiling ``wall(1) / (CPU seconds / cores)``.

    python bench/appworld_concurrency.py [--group 2] [--workers 1,2,4] [--repeat 3] [--setup]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402


def _home(arg: str | None) -> Path:
    from coevolve_appworld import APPWORLD_VERSION

    if arg:
        return Path(arg).expanduser()
    env = os.environ.get("COEVOLVE_APPWORLD_TEST_HOME")
    return Path(env) if env else Path.home() / ".cache" / "coevolve-tests" / f"appworld-{APPWORLD_VERSION}"


def _sched(pids: list[int]) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for a CPU) of every thread of ``pids``,
    from the kernel's scheduler statistics (``/proc/PID/task/TID/schedstat``)."""
    on_cpu = waiting = 0
    for pid in pids:
        for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                run, wait, _ = stat.read_text().split()
            except (OSError, ValueError):
                continue
            on_cpu += int(run)
            waiting += int(wait)
    return on_cpu / 1e9, waiting / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=None, help="AppWorld runtime folder (default: the tests' cache)")
    ap.add_argument("--setup", action="store_true", help="build the runtime with the synthetic set first if missing (needs PyPI once)")
    ap.add_argument("--group", type=int, default=2, help="episodes per task (the set has 4 tasks)")
    ap.add_argument("--workers", default="1,2,4", help="thread counts to compare; 1 is the baseline")
    ap.add_argument("--repeat", type=int, default=3)
    add_json_flag(ap)
    args = ap.parse_args()
    counts = sorted({int(x) for x in args.workers.split(",")} | {1})
    params = {"group": args.group, "workers": counts, "repeat": args.repeat, "cores": os.cpu_count()}

    from coevolve_appworld.env import AppWorldEnv
    from coevolve_appworld.runtime import AppWorldRuntimeError, load_runtime, setup_runtime
    from coevolve_appworld.testing import ScriptPolicy
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups

    home = _home(args.home)
    try:
        if args.setup:
            setup_runtime(home, synthetic=True)
        load_runtime(home)
    except (AppWorldRuntimeError, OSError) as e:
        msg = f"AppWorld runtime unavailable under {home} ({e}); run with --setup, or `coevolve appworld setup --synthetic --home {home}`"
        print(msg)
        write_json(args.json, "appworld_concurrency", [], params, skipped=msg)
        return 0

    probe = AppWorldEnv(home=str(home))
    tasks = probe.tasks("train") + probe.tasks("dev")
    episodes = len(tasks) * args.group
    policy = ScriptPolicy(tasks)
    made: list[AppWorldEnv] = []

    def make() -> AppWorldEnv:
        env = AppWorldEnv(home=str(home), max_workers=max(16, episodes))
        made.append(env)
        return env

    envs = EnvPool(make)

    def rollout(n: int) -> tuple[float, list]:
        t0 = time.perf_counter()
        groups = collect_groups(policy, envs, tasks, RolloutConfig(group_size=args.group, env_workers=n), step=0)
        return time.perf_counter() - t0, groups

    t0 = time.perf_counter()
    _, groups = rollout(max(counts))  # starts the workers (untimed)
    start_s = time.perf_counter() - t0
    scores = [t.score for g in groups for t in g.trajectories]
    turns = sum(t.info["turns"] for g in groups for t in g.trajectories)
    if min(scores) < 1.0:
        print(f"warning: not every scripted episode succeeded ({scores}); the workers may be unhealthy")
    workers = [e.worker.pid for e in made if e._worker is not None]

    walls: dict[int, list[float]] = {n: [] for n in counts}
    sched: dict[int, list[tuple[float, float]]] = {n: [] for n in counts}  # per rollout: (cpu s, run-queue wait s)
    sdk_cpu: dict[int, list[float]] = {n: [] for n in counts}  # the SDK process alone (its threads share one GIL)
    for _ in range(args.repeat):
        for n in counts:
            c0, w0 = _sched(workers)
            s0 = time.process_time()  # every thread of this process, the pool's finished ones included
            wall, _ = rollout(n)
            c1, w1 = _sched(workers)
            walls[n].append(wall)
            sdk_cpu[n].append(time.process_time() - s0)
            sched[n].append((c1 - c0 + sdk_cpu[n][-1], w1 - w0))
    envs.close()
    for e in made:
        e.close()

    best = {n: min(w) for n, w in walls.items()}
    cores = os.cpu_count() or 1
    cpu = min(c for c, _ in sched[1])
    ceiling = best[1] / max(cpu / cores, 1e-9)
    top = max(counts)
    cpu_top, wait_top = min(sched[top])
    print(f"AppWorld synthetic set: {len(tasks)} tasks x {args.group} = {episodes} episodes, {turns} environment steps "
          f"per rollout (+ {episodes} world openings and gradings); workers started in {start_s:.1f}s; {cores} cores")
    print(f"{'env_workers':>11} {'best s':>8} {'median s':>9} {'speed-up':>9} {'goal':>6}")
    figures = []
    for n in counts:
        med = sorted(walls[n])[len(walls[n]) // 2]
        sp = best[1] / best[n]
        print(f"{n:>11} {best[n]:8.2f} {med:9.2f} {sp:9.2f} {0.8 * n if n > 1 else 0:6.1f}")
        if n > 1:
            figures.append(Figure(
                name=f"AppWorld rollout, {n} env threads", value=best[n], unit="s", baseline=best[1],
                baseline_label="1 thread (sequential steps)", ratio=sp, goal_op=">=", goal=0.8 * n,
                note=f"speed-up; idle-{cores}-core CPU ceiling {ceiling:.1f}x",
            ))
    print(f"CPU during a sequential rollout: {cpu:.2f}s (SDK process + {len(workers)} workers) for {best[1]:.2f}s of wall time "
          f"-> on {cores} idle cores no thread count could beat {ceiling:.2f}x")
    wait_one = min(w for _, w in sched[1])
    print(f"  and {wait_one:.2f}s of the workers' time waiting for a CPU: on this machine's load the rest, "
          f"{max(0.0, best[1] - cpu - wait_one):.2f}s, is what a step really waits on (disk, sockets, sleeps)")
    print(f"of which the SDK process (rollout loop, HTTP clients; one GIL): {min(sdk_cpu[1]):.2f}s sequential, "
          f"{min(sdk_cpu[top]):.2f}s with {top} threads")
    print(f"with {top} threads: {cpu_top:.2f}s on a CPU, {wait_top:.2f}s runnable but waiting for one (workers, summed), "
          f"{best[top]:.2f}s wall: the run queue wait is what other processes on the machine take from this run")
    try:
        load = os.getloadavg()[0]
        print(f"load average (1 min) at the end: {load:.1f} on {cores} cores")
    except OSError:
        load = None
    write_json(args.json, "appworld_concurrency", figures, {**params, "episodes": episodes, "steps": turns,
                                                            "cpu_seconds_sequential": cpu, "cpu_ceiling": ceiling,
                                                            "cpu_seconds_top": cpu_top, "runqueue_wait_seconds_top": wait_top,
                                                            "sdk_cpu_seconds_sequential": min(sdk_cpu[1]), "runqueue_wait_seconds_sequential": min(w for _, w in sched[1]),
                                                            "load_average": load})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
