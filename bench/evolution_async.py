"""How much of a run's wall time does training spend waiting on evolution: sync vs async.

The teacher is the core's random explorer made to take SECONDS per model call (three calls
per signal: reflect, explore, abstract), which stands in for a remote LLM's latency; the
policy and algorithm are the test suite's numpy components, so the measurement isolates the
loop's scheduling. The paper's synchronous figure is 9.7-12.8 %; the goal for async is <= 2 %.

    python bench/evolution_async.py [--seconds 2] [--steps 12]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coevolve_sdk.config import RunConfig  # noqa: E402
from coevolve_sdk.components.hooks import hookimpl  # noqa: E402
from coevolve_sdk.run.loop import CoEvolveLoop  # noqa: E402
from coevolve_sdk.components.registry import Registry  # noqa: E402
from coevolve_sdk.evolution.teacher import RandomExplorer  # noqa: E402

DELAY = 2.0


class SlowExplorer(RandomExplorer):
    name = "slow-explorer"

    def reflect(self, *a, **k):  # type: ignore[no-untyped-def]
        time.sleep(DELAY)
        return super().reflect(*a, **k)

    def explore(self, *a, **k):  # type: ignore[no-untyped-def]
        time.sleep(DELAY)
        return super().explore(*a, **k)

    def abstract(self, *a, **k):  # type: ignore[no-untyped-def]
        time.sleep(DELAY)
        return super().abstract(*a, **k)


class _Plugin:
    @hookimpl
    def register_teachers(self):  # type: ignore[no-untyped-def]
        return [SlowExplorer]


def run(mode: str, steps: int, step_delay: float, workdir: Path, every: int = 3, lag: int = 1) -> dict[str, float]:
    cfg = RunConfig.model_validate({
        "run_dir": str(workdir / mode), "seed": 0, "plugins": ["tests.core.toy_plugin"],
        "environment": {"name": "kvstore", "options": {"train_tasks": 8, "test_tasks": 2, "max_steps": 4}},
        "policy": {"name": "toy-menu"},
        "algorithm": {"name": "toy-reinforce", "options": {"step_delay": step_delay}},
        "detectors": [{"name": "toy-mixed"}],
        "teacher": {"name": "slow-explorer", "options": {"rounds": 1, "steps_per_round": 4}},
        "rollout": {"group_size": 4},
        "training": {"steps": steps, "tasks_per_step": 4, "checkpoint_every": steps, "warm_start": False},
        "evolution": {"every": every, "mode": mode, "workers": 2, "max_signals_per_kind": 2, "async_lag": lag},
        "pool": {"seed_tasks": 8, "seed_source": "env"},
        "eval": {"before": False, "after": False},
    })
    reg = Registry()
    reg.pm.register(_Plugin(), name="bench-slow-teacher")
    reg._components = None
    t0 = time.perf_counter()
    loop = CoEvolveLoop(cfg, registry=reg)
    t_train0 = time.perf_counter()
    loop.run()
    total = time.perf_counter() - t_train0
    con = sqlite3.connect(workdir / mode / "run.sqlite")
    waited = con.execute("SELECT COALESCE(SUM(value), 0) FROM metrics WHERE key = 'time/evolution_wait'").fetchone()[0]
    rounds = con.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
    evo = con.execute("SELECT COALESCE(SUM(value), 0) FROM metrics WHERE key = 'evolution/seconds'").fetchone()[0]
    con.close()
    return {"total": total, "waited": waited, "share": waited / total, "rounds": rounds, "evolution_seconds": evo, "setup": t_train0 - t0}


def main() -> None:
    global DELAY
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated latency of one teacher call")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--step-delay", type=float, default=1.0, help="simulated seconds of one training step")
    ap.add_argument("--every", type=int, default=3, help="evolution.every (paper: 10)")
    ap.add_argument("--async-lag", type=int, default=1, help="evolution.async_lag: training steps a round may overlap")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures as JSON (bench/run_all.py)")
    args = ap.parse_args()
    DELAY = args.seconds
    with tempfile.TemporaryDirectory() as d:
        # the first run in a process pays one-time costs (lazy imports, first checkpoint): not measured
        run("sync", 2, 0.0, Path(d) / "warm-up", args.every, args.async_lag)
        sync = run("sync", args.steps, args.step_delay, Path(d), args.every, args.async_lag)
        asyn = run("async", args.steps, args.step_delay, Path(d), args.every, args.async_lag)
    print(f"teacher call latency {DELAY:.2f}s, {args.steps} steps, step time ~{args.step_delay:.2f}s, evolution every "
          f"{args.every} steps, async_lag {args.async_lag}")
    if sync["rounds"]:
        per_round = sync["evolution_seconds"] / sync["rounds"]
        print(f"a round takes {per_round:.1f}s = {per_round / args.step_delay:.1f} steps (paper, Table 7: 480s / 376s = 1.3 steps); "
              f"async admits it after async_lag={args.async_lag} steps and waits for the rest")
    print(f"{'mode':<6} {'wall s':>8} {'waited s':>9} {'waited %':>9} {'rounds':>7} {'evolution s':>12}")
    for name, r in (("sync", sync), ("async", asyn)):
        print(f"{name:<6} {r['total']:8.1f} {r['waited']:9.2f} {100 * r['share']:8.2f}% {r['rounds']:7d} {r['evolution_seconds']:12.1f}")
    ratio = asyn["total"] / sync["total"]
    print(f"async wall time / sync wall time = {ratio:.2f} (baseline: sync, same run)")
    print(f"goal: async waited share <= 2.00%  ->  {'met' if asyn['share'] <= 0.02 else 'NOT met'}")
    if args.json is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from benchlib import Figure, write_json

        write_json(args.json, "evolution_async", [
            Figure(name="async evolution: training waits", value=100 * asyn["share"], unit="% of wall", baseline=100 * sync["share"],
                   baseline_label="sync mode", goal_on="value", goal_op="<=", goal=2.0),
            Figure(name="async / sync wall time", value=asyn["total"], unit="s", baseline=sync["total"], baseline_label="sync mode"),
        ], {"seconds": DELAY, "steps": args.steps, "step_delay": args.step_delay, "every": args.every, "async_lag": args.async_lag})


if __name__ == "__main__":
    main()
