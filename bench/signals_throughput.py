"""Throughput of the forgetting, boundary and rare detectors (plugin coevolve-signals).

Feeds synthetic trajectory records (default 1,000,000) through all three detectors, step by step
as a training run would (32 groups of 8 trajectories per step), and prints records per second,
the ratio against named baselines measured in the same run, and peak memory. Nothing here is a
pass/fail test on time: the numbers are printed side by side for a person to read.

What is measured, so that the numbers are honest:

* **fast path** (the headline number): for every step, ``StepBatch(...)`` (which validates the
  arrays) and ``observe_batch`` of each detector. This is the same code ``observe()`` runs; it
  stops before turning marks into pydantic ``Signal`` records. The records arrive as a list of
  task ids, a float array of scores and a list of action-pattern strings per step, so interning
  the pattern strings is inside the timed loop.
* **naive baseline**: a straightforward pure-Python implementation of the same three rules,
  written below, run on the same records. Its marks must equal the fast path's (checked; the
  script exits 1 if they differ).
* **goal**: 500,000 records/s, the target set for this machine.
* **pydantic path**: ``observe(groups, history, step)`` on ``RolloutGroup`` records, including the
  ``Signal`` records it returns, on the first ``--pydantic-records`` records (building the
  groups themselves is not timed: the rollout produces them anyway).
* **memory**: a second pass over all records under ``tracemalloc`` (numpy reports its arrays to
  it) gives the peak memory the detectors allocate (state and temporaries); ``ru_maxrss`` is the
  whole process, synthetic data included.

Run: ``python bench/signals_throughput.py`` (``--help`` for the knobs).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
import tracemalloc
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coevolve_sdk.evolution.signals import CompetenceHistory
from coevolve_sdk.records import RolloutGroup, Task, Trajectory
from coevolve_signals import (
    BoundaryDetector,
    ForgettingDetector,
    ForgettingOptions,
    RareDetector,
    RareOptions,
    StepBatch,
)

GOAL_RATE = 500_000.0
TOOLS = [f"tool_{i:02d}" for i in range(40)]


@dataclass
class StepData:
    task_ids: list[str]
    sizes: np.ndarray
    scores: np.ndarray
    patterns: list[str]


def synthesise(records: int, n_tasks: int, groups_per_step: int, k: int, n_patterns: int, seed: int) -> list[StepData]:
    """Steps of synthetic records: drifting per-task success rates, Zipf-distributed tool patterns."""
    rng = np.random.default_rng(seed)
    task_names = [f"task-{i:05d}" for i in range(n_tasks)]
    skill = rng.beta(0.7, 0.7, size=n_tasks)
    vocab: list[str] = [""]  # index 0: trajectories without a tool call
    seen = {""}
    while len(vocab) < n_patterns:
        length = int(rng.integers(1, 6))
        p = ">".join(TOOLS[j] for j in rng.integers(0, len(TOOLS), size=length))
        if p not in seen:
            seen.add(p)
            vocab.append(p)
    weights = 1.0 / np.arange(1, n_patterns + 1) ** 1.5
    weights /= weights.sum()
    steps: list[StepData] = []
    left = records
    while left > 0:
        n_groups = min(groups_per_step, -(-left // k))
        sizes = np.full(n_groups, k, dtype=np.int64)
        if n_groups * k > left:
            sizes[-1] = left - (n_groups - 1) * k
        n = int(sizes.sum())
        tasks = rng.choice(n_tasks, size=n_groups, replace=False)
        p = np.repeat(skill[tasks], sizes)
        scores = (rng.random(n) < p).astype(np.float64)
        partial = rng.random(n) < 0.1
        scores[partial] = rng.choice([0.25, 0.5, 0.75], size=int(partial.sum()))
        skill[tasks] = np.clip(skill[tasks] + rng.normal(0.0, 0.08, size=n_groups), 0.0, 1.0)
        pattern_idx = rng.choice(n_patterns, size=n, p=weights)
        steps.append(StepData([task_names[t] for t in tasks], sizes, scores, [vocab[i] for i in pattern_idx]))
        left -= n
    return steps


def make_detectors(window: int, theta: float, n_min: int, min_count: int):
    return (
        ForgettingDetector(ForgettingOptions(window=window)),
        BoundaryDetector(),
        RareDetector(RareOptions(theta=theta, n_min=n_min, min_count=min_count)),
    )


def run_fast(steps: list[StepData], detectors) -> tuple[float, list[int], list[int]]:
    """The measured path. Returns seconds, marks per detector, and an order-sensitive checksum per detector."""
    forgetting, boundary, rare = detectors
    counts = [0, 0, 0]
    sums = [0, 0, 0]
    t0 = time.perf_counter()
    for step, d in enumerate(steps):
        batch = StepBatch(step, d.task_ids, d.sizes, d.scores, d.patterns)
        for i, det in enumerate((forgetting, boundary, rare)):
            m = det.observe_batch(batch)
            if m.records.shape[0]:
                counts[i] += m.records.shape[0]
                sums[i] += int((m.records + step * 4096).sum())
    return time.perf_counter() - t0, counts, sums


class NaiveDetectors:
    """The same three rules in plain Python (dicts, deques, loops over records): the baseline."""

    def __init__(self, window: int, theta: float, n_min: int, min_count: int) -> None:
        self.window, self.theta, self.n_min, self.min_count = window, theta, n_min, min_count
        self.history: dict[str, deque[float]] = {}
        self.pattern_counts: dict[str, int] = {}
        self.total = 0

    def step(self, d: StepData) -> tuple[list[int], list[int], list[int]]:
        forgetting: list[int] = []
        boundary: list[int] = []
        rare: list[int] = []
        r = 0
        for task, size in zip(d.task_ids, d.sizes.tolist()):
            group = d.scores[r : r + size].tolist()
            window = self.history.get(task)
            solved_before = window is not None and any(s >= 0.5 for s in window)
            for j, s in enumerate(group):
                if solved_before and s < 0.5:
                    forgetting.append(r + j)
            if any(s >= 0.5 for s in group) and any(s < 0.5 for s in group):  # a success and a failure
                boundary.extend(range(r, r + size))
            r += size
        r = 0
        for task, size in zip(d.task_ids, d.sizes.tolist()):
            window = self.history.get(task)
            if window is None:
                window = self.history[task] = deque(maxlen=self.window)
            window.extend(d.scores[r : r + size].tolist())
            r += size
        for p in d.patterns:
            if p:
                self.pattern_counts[p] = self.pattern_counts.get(p, 0) + 1
                self.total += 1
        if self.total >= self.n_min:
            for i, p in enumerate(d.patterns):
                c = self.pattern_counts.get(p, 0)
                if p and c >= self.min_count and c * 100 < self.theta * self.total:
                    rare.append(i)
        return forgetting, boundary, rare


def run_naive(steps: list[StepData], naive: NaiveDetectors) -> tuple[float, list[int], list[int]]:
    counts = [0, 0, 0]
    sums = [0, 0, 0]
    t0 = time.perf_counter()
    for step, d in enumerate(steps):
        for i, marks in enumerate(naive.step(d)):
            counts[i] += len(marks)
            sums[i] += sum(marks) + step * 4096 * len(marks)
    return time.perf_counter() - t0, counts, sums


def run_pydantic(steps: list[StepData], detectors, limit: int) -> tuple[float, int, int]:
    """observe() on RolloutGroups for the first ``limit`` records; the history is recorded as the loop does."""
    groups_per_step: list[list[RolloutGroup]] = []
    n = 0
    for step, d in enumerate(steps):
        if n >= limit:
            break
        groups = []
        r = 0
        for task, size in zip(d.task_ids, d.sizes.tolist()):
            trajs = [
                Trajectory(id=f"traj-{step}-{r + j}", task_id=task, step=step, score=float(d.scores[r + j]),
                           success=bool(d.scores[r + j] >= 0.5), action_pattern=d.patterns[r + j])
                for j in range(size)
            ]
            groups.append(RolloutGroup(task=Task(id=task, env="synthetic", query=task), step=step, trajectories=trajs))
            r += size
        groups_per_step.append(groups)
        n += r
    history = CompetenceHistory()
    n_signals = 0
    t0 = time.perf_counter()
    for step, groups in enumerate(groups_per_step):
        for det in detectors:
            n_signals += len(det.observe(groups, history, step))
        for g in groups:
            for t in g.trajectories:
                history.record(g.task.id, step, t.score, t.success)
    return time.perf_counter() - t0, n, n_signals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="synthetic trajectory records (default 1,000,000)")
    ap.add_argument("--tasks", type=int, default=2_000, help="distinct tasks in the synthetic pool")
    ap.add_argument("--groups-per-step", type=int, default=32, help="groups (tasks) per step (paper: 32)")
    ap.add_argument("--group-size", type=int, default=8, help="trajectories per group K (paper: 8)")
    ap.add_argument("--patterns", type=int, default=4_000, help="distinct action patterns (Zipf-distributed)")
    ap.add_argument("--naive-records", type=int, default=None, help="records for the naive baseline (default: all)")
    ap.add_argument("--pydantic-records", type=int, default=20_000, help="records for the observe() comparison")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures as JSON (bench/run_all.py)")
    args = ap.parse_args(argv)
    if args.groups_per_step > args.tasks:
        ap.error("--groups-per-step cannot exceed --tasks (a step samples distinct tasks)")
    cfg = dict(window=24, theta=5.0, n_min=512, min_count=2)

    t0 = time.perf_counter()
    steps = synthesise(args.records, args.tasks, args.groups_per_step, args.group_size, args.patterns, args.seed)
    total = sum(len(d.scores) for d in steps)
    print(f"synthetic data: {total:,} records in {len(steps):,} steps ({args.groups_per_step} groups x {args.group_size}), "
          f"{args.tasks:,} tasks, {args.patterns:,} distinct patterns; built in {time.perf_counter() - t0:.1f} s")
    print(f"detector options: forgetting window={cfg['window']}; rare theta={cfg['theta']}, n_min={cfg['n_min']}, min_count={cfg['min_count']}")
    print()

    gc.collect()
    dets = make_detectors(**cfg)
    fast_s, fast_counts, fast_sums = run_fast(steps, dets)
    fast_rate = total / fast_s
    print("measured path: StepBatch(...) + observe_batch() of forgetting, boundary and rare, per step")
    print("               (the code observe() runs, up to but not including building pydantic Signal records)")
    print(f"  fast path:        {fast_s:8.3f} s   {fast_rate:12,.0f} records/s")
    print(f"  marks:            forgetting {fast_counts[0]:,}, boundary {fast_counts[1]:,}, rare {fast_counts[2]:,}")
    print(f"  vs goal:          {GOAL_RATE:12,.0f} records/s   ratio fast/goal = {fast_rate / GOAL_RATE:.2f}x")

    naive_steps = steps
    if args.naive_records is not None:
        acc, naive_steps = 0, []
        for d in steps:
            if acc >= args.naive_records:
                break
            naive_steps.append(d)
            acc += len(d.scores)
    naive_total = sum(len(d.scores) for d in naive_steps)
    gc.collect()
    naive_s, naive_counts, naive_sums = run_naive(naive_steps, NaiveDetectors(**cfg))
    naive_rate = naive_total / naive_s
    print(f"  naive pure Python:{naive_s:8.3f} s   {naive_rate:12,.0f} records/s ({naive_total:,} records)   ratio fast/naive = {fast_rate / naive_rate:.2f}x")
    agree = True
    if naive_steps is steps:
        agree = naive_counts == fast_counts and naive_sums == fast_sums
        print(f"  marks identical to the naive implementation: {'yes' if agree else 'NO'}")
    else:
        print("  (marks not compared: the naive run covered fewer records)")

    gc.collect()
    py_s, py_n, py_signals = run_pydantic(steps, make_detectors(**cfg), args.pydantic_records)
    py_rate = py_n / py_s
    print(f"  pydantic observe():{py_s:7.3f} s   {py_rate:12,.0f} records/s ({py_n:,} records, {py_signals:,} Signal records built)"
          f"   ratio observe/fast = {py_rate / fast_rate:.3f}x")
    print()

    if not args.no_memory:
        gc.collect()
        dets = make_detectors(**cfg)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        run_fast(steps, dets)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"memory (tracemalloc, second pass over all records): detectors hold {(current - base) / 2**20:.2f} MiB at the end, "
              f"peak {(peak - base) / 2**20:.2f} MiB above the start")
        sizes = [len(json.dumps(d.state_dict())) for d in dets]
        print(f"checkpoint state (json): forgetting {sizes[0] / 1024:.0f} KiB, boundary {sizes[1]} B, rare {sizes[2] / 1024:.0f} KiB")
    if args.json is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from benchlib import Figure, write_json

        write_json(args.json, "signals_throughput", [
            Figure(name="detectors core path, records/s", value=fast_rate, unit="records/s", baseline=naive_rate,
                   baseline_label="naive pure Python", goal_on="value", goal_op=">=", goal=GOAL_RATE,
                   note="marks equal the naive implementation's" if agree and naive_steps is steps else ""),
            Figure(name="detectors pydantic observe(), records/s", value=py_rate, unit="records/s", baseline=fast_rate,
                   baseline_label="core path"),
        ], {"records": total, "pydantic_records": py_n})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_mib = rss / 2**20 if sys.platform == "darwin" else rss / 1024
    print(f"process peak RSS (synthetic data, interpreter and numpy included): {rss_mib:.0f} MiB")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
