"""How cost grows toward paper scale: step time, run-store size, pool and detector overhead.

Four measurements, each printed with what it means for the paper's BFCL run (120 steps of
32 tasks x 8 rollouts, up to 30 turns; Table 7: 45,144 s of wall time, 376 s a step):

* **step** -- one training step (the core ``collect_groups`` + GRPO's update) of the tiny model
  as tasks per step grow 1x -> 16x (group size fixed). The exponent of a power-law fit of time
  on size says whether the step is linear (1.0), cheaper per episode as it grows (< 1: batched
  generation amortises per-call overhead) or worse (> 1).
* **store** -- bytes one trajectory costs in the run store (``RunStore.record_step``, real SQLite
  file, WAL checkpointed), for trajectories of BFCL's paper configuration (official tool docs)
  replayed from the reference actions, then padded with real turns up to 10 and 30 turns; the
  projection to 120 paper steps; the same with the store's compression option; and the store
  per 1,000 paper steps with the defaults (compressed, every trajectory kept) and with
  ``store.keep_trajectory_steps=10`` (older trajectories keep only their row).
* **pool** -- sampling, deduplication and admission at 10^3, 10^4 and 10^5 tasks in the pool
  (the real ``TaskPool`` on a real store), per step as the loop calls them.
* **detectors** -- the three detectors through the loop's real path (``observe`` on pydantic
  ``RolloutGroup`` records, then the competence history) over 10^6 records, steady-state cost per
  paper step of 256 records.

The goal: store + pool + detectors under 1 % of a paper-size step's wall time.

    python bench/scaling.py [--parts step,store,pool,detectors] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchlib import Figure, add_json_flag, write_json  # noqa: E402

PAPER_STEP_S = 45_144 / 120  # Table 7, BFCL: wall time per training step
PAPER_STEPS, PAPER_TASKS, PAPER_GROUP, PAPER_TURNS = 120, 32, 8, 30
PAPER_TRAJ_PER_STEP = PAPER_TASKS * PAPER_GROUP


def _fit_exponent(sizes: list[float], times: list[float]) -> float:
    """Least-squares slope of log(time) on log(size)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


# ------------------------------------------------------------------------------------------ step
def bench_step(scales: list[int], group: int, repeat: int) -> tuple[list[Figure], dict[str, Any]]:
    import torch

    from coevolve_grpo.algorithm import GRPO, GRPOOptions
    from coevolve_grpo.testing import PickToolEnv
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
    from grpo_common import tiny_setup

    torch.set_num_threads(1)
    ctx, policy, env = tiny_setup(64)
    alg = GRPO(GRPOOptions(lr=1e-6, beta=0.0, micro_batch_size=16, cpu=True), ctx)
    pool = EnvPool(lambda: PickToolEnv(max_steps=2))
    settings = RolloutConfig(group_size=group, max_new_tokens=24, temperature=0.9)
    task = env.target_task()
    times: dict[int, list[float]] = {s: [] for s in scales}
    tokens: dict[int, list[int]] = {s: [] for s in scales}
    counter = [0]

    def one(s: int) -> None:
        counter[0] += 1
        t0 = time.perf_counter()
        groups = collect_groups(policy, pool, [task] * s, settings, counter[0], seed=counter[0])
        alg.step(groups)
        times[s].append(time.perf_counter() - t0)
        tokens[s].append(sum(len(t.token_ids or []) for g in groups for t in g.trajectories))

    one(scales[0])  # warm-up
    times[scales[0]].clear(), tokens[scales[0]].clear()
    for _ in range(repeat):
        for s in scales:  # interleaved, so load bursts hit every size
            one(s)
    best = [min(times[s]) for s in scales]
    exponent = _fit_exponent([float(s) for s in scales], best)
    print(f"step time (collect_groups + GRPO update, tiny qwen3 hidden=64, 1 thread), {group} rollouts per task:")
    print(f"{'tasks':>6} {'episodes':>9} {'best s':>8} {'per episode ms':>15} {'tokens':>7} {'x of 1x':>8}")
    for s, b in zip(scales, best):
        print(f"{s:>6} {s * group:>9} {b:8.3f} {1000 * b / (s * group):15.1f} {int(statistics.median(tokens[s])):>7} {b / best[0]:8.2f}")
    print(f"power-law fit: time ~ size^{exponent:.2f} ({'sub-linear' if exponent < 0.95 else 'linear' if exponent <= 1.05 else 'super-linear'})")
    top = scales[-1]
    figs = [Figure(name=f"step time {top}x / 1x tasks", value=best[-1], unit="s", baseline=best[0] * top,
                   baseline_label=f"1x time x {top} (linear)", goal_op="<=", goal=1.0,
                   note=f"fitted exponent {exponent:.2f}; ratio <= 1: no worse than linear")]
    return figs, {"step_exponent": exponent, "step_best_s": dict(zip(map(str, scales), best))}


# ----------------------------------------------------------------------------------------- store
class _ReplayPolicy:
    """Sends ``task.reference_actions[n]`` at turn ``n`` (then the last again): real agent
    messages of the environment's own format, without a model."""

    eos_token_id = 0

    def __init__(self, tasks: list[Any]) -> None:
        self.tasks = tasks

    def encode_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        user = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        return [10 + next(i for i, t in enumerate(self.tasks) if t.query in user or user in t.query)]

    def encode_followup(self, messages: list[dict[str, Any]]) -> list[int]:
        return [1]

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0, greedy: bool = False) -> list[Any]:
        from coevolve_sdk.training.policy import Generation

        out = []
        for ids in prompts:
            acts = self.tasks[ids[0] - 10].reference_actions
            turn = sum(1 for t in ids if t == 0)
            out.append(Generation(token_ids=[100 + turn, 0], logprobs=[-0.5, 0.0], text=acts[min(turn, len(acts) - 1)]))
        return out


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _store_bytes(trajs: list[Any], repeat_steps: int, pruned: bool = False, **store_kw: Any) -> tuple[float, float]:
    """(bytes per trajectory on disk, seconds per record_step of 256) writing ``trajs`` as steps;
    ``pruned``: what a trajectory costs once store.keep_trajectory_steps has dropped its turns."""
    from coevolve_sdk.storage.store import RunStore

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.sqlite"
        store = RunStore(path, **store_kw)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = _db_bytes(path)
        secs = []
        n = 0
        for step in range(1, repeat_steps + 1):
            batch = [t.model_copy(update={"id": f"traj-{step}-{i}", "step": step}) for i, t in enumerate(trajs)]
            t0 = time.perf_counter()
            store.record_step(step, batch, [], {"reward_mean": 0.5})
            secs.append(time.perf_counter() - t0)
            n += len(batch)
        if pruned:
            store.prune_trajectories(repeat_steps)
            store._db.execute("VACUUM")  # the pages the turns held, given back (a run reuses them instead)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        after = _db_bytes(path)
        store.close()
    return (after - before) / n, min(secs) * PAPER_TRAJ_PER_STEP / len(trajs)


def _pad_turns(traj: Any, turns: int) -> Any:
    """The trajectory extended to ``turns`` agent turns by repeating its own turns (real text)."""
    head = traj.messages[:2]
    body = traj.messages[2:]
    steps = list(traj.steps)
    if not steps:
        return traj
    per_turn = max(1, len(body) // len(steps))
    msgs, st = list(head), []
    i = 0
    while len(st) < turns:
        k = i % len(steps)
        msgs.extend(body[k * per_turn : (k + 1) * per_turn])
        st.append(steps[k])
        i += 1
    return traj.model_copy(update={"messages": msgs, "steps": st, "info": {**traj.info, "turns": turns}})


def _verbose(traj: Any, chars: int) -> Any:
    """The trajectory with ``chars`` characters of prose before each agent message's calls, as a
    chatty model writes them (the same text goes into the message and the step's action)."""
    import random

    rnd = random.Random(0)
    words = ("the", "file", "now", "I", "will", "check", "directory", "first", "then", "move", "report", "result",
             "because", "user", "asked", "for", "list", "content", "current", "path", "ticket", "status")

    def prose() -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < chars:
            out.append(rnd.choice(words))
        return " ".join(out) + "\n"

    msgs = [dict(m, content=prose() + str(m.get("content", ""))) if m.get("role") == "assistant" else m for m in traj.messages]
    steps = [st.model_copy(update={"action": prose() + st.action}) for st in traj.steps]
    return traj.model_copy(update={"messages": msgs, "steps": steps})


def _zlib_ratio(trajs: list[Any]) -> float:
    import zlib

    raw = [t.without_tokens().model_dump_json().encode() for t in trajs]
    return sum(map(len, raw)) / sum(len(zlib.compress(r, 6)) for r in raw)


def _per_1000(row: dict[str, Any], key: str) -> float:
    return row[key] * 1000 * PAPER_TRAJ_PER_STEP


def bench_store(n_tasks: int, repeat_steps: int) -> tuple[list[Figure], dict[str, Any]]:
    from coevolve_bfcl.env import BFCLMultiTurnEnv
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
    from coevolve_sdk.storage.store import RunStore

    env = BFCLMultiTurnEnv(category="base", max_steps=PAPER_TURNS)  # the paper config's environment options
    tasks = env.tasks("train")[:n_tasks]
    pol = _ReplayPolicy(tasks)
    groups = collect_groups(pol, EnvPool(lambda: BFCLMultiTurnEnv(category="base", max_steps=PAPER_TURNS)), tasks,  # type: ignore[arg-type]
                            RolloutConfig(group_size=1, max_context_tokens=1 << 20), step=1)
    base = [g.trajectories[0] for g in groups]
    turns_ref = statistics.fmean(t.info["turns"] for t in base)
    opening = statistics.fmean(len(t.messages[0].get("content", "")) + len(t.messages[1].get("content", "")) for t in base)
    can_compress = True  # RunStore(compress=True): store.compress_trajectories
    rows = []
    print(f"run store: BFCL base, paper options (official tool docs), {len(base)} reference replays as trajectories "
          f"(opening {opening / 1000:.1f} k characters, {turns_ref:.1f} turns on average)")
    print(f"{'turns':>9} {'bytes/traj':>11} {'x 30,720 traj':>14} {'s per step':>11} {'zlib':>5}" + ("  compressed: bytes/traj  120 steps  ratio" if can_compress else ""))
    out: dict[str, Any] = {"store_opening_chars": opening, "store_reference_turns": turns_ref}
    cases = (("ref", base), ("10", [_pad_turns(t, 10) for t in base]), ("30", [_pad_turns(t, 30) for t in base]),
             ("30+1k", [_verbose(_pad_turns(t, 30), 1000) for t in base]))
    for label, trajs in cases:
        per, secs = _store_bytes(trajs, repeat_steps)
        total = per * PAPER_STEPS * PAPER_TRAJ_PER_STEP
        z = _zlib_ratio(trajs)
        line = f"{label if label != 'ref' else f'{turns_ref:.1f}':>9} {per:11,.0f} {total / 1e9:11.2f} GB {secs:11.3f} {z:4.1f}x"
        row = {"turns": label, "bytes_per_traj": per, "paper_total_bytes": total, "record_step_s": secs, "zlib_ratio": z}
        if can_compress:
            cper, csecs = _store_bytes(trajs, repeat_steps, compress=True)
            ctotal = cper * PAPER_STEPS * PAPER_TRAJ_PER_STEP
            line += f"  {cper:22,.0f} {ctotal / 1e9:7.2f} GB {per / cper:6.1f}x"
            row.update(compressed_bytes_per_traj=cper, compressed_paper_total_bytes=ctotal, compressed_record_step_s=csecs)
        rows.append(row)
        print(line)
    out["store_rows"] = rows
    print("('30+1k': 30 turns with 1,000 characters of prose before each agent message's calls, a chatty model;"
          " zlib: what compressing each row's JSON alone would save)")
    # the defaults (store.compress_trajectories on, every trajectory kept), per 1,000 paper steps;
    # and with store.keep_trajectory_steps, where an old trajectory keeps only its row
    stub, _ = _store_bytes(base, repeat_steps, pruned=True)
    keep = 10
    print(f"store per 1,000 paper steps ({PAPER_TRAJ_PER_STEP} trajectories each) with the defaults (compressed, all kept): "
          + ", ".join(f"{r['turns'] if r['turns'] != 'ref' else f'{turns_ref:.1f}'} turns {_per_1000(r, 'compressed_bytes_per_traj') / 1e9:.2f} GB"
                      for r in rows))
    bounded = {r["turns"]: (1000 - keep) * PAPER_TRAJ_PER_STEP * stub + keep * PAPER_TRAJ_PER_STEP * r["compressed_bytes_per_traj"] for r in rows}
    print(f"  with store.keep_trajectory_steps={keep}: {stub:,.0f} B per pruned trajectory, "
          + ", ".join(f"{k if k != 'ref' else f'{turns_ref:.1f}'} turns {v / 1e9:.2f} GB" for k, v in bounded.items())
          + " (plus the trajectories signals point to, whole)")
    out["store_per_1000_steps_default_bytes"] = {r["turns"]: _per_1000(r, "compressed_bytes_per_traj") for r in rows}
    out["store_per_1000_steps_keep10_bytes"] = bounded
    out["store_pruned_bytes_per_traj"] = stub
    worst = rows[-1]
    figs = [Figure(name="run store, 120 paper steps (30 turns, 1k chars/turn)", value=worst["paper_total_bytes"] / 1e9, unit="GB",
                   note=f"{worst['bytes_per_traj']:,.0f} B per trajectory; reference-length 30 turns: {rows[2]['paper_total_bytes'] / 1e9:.2f} GB")]
    if can_compress:
        figs.append(Figure(name="run store compressed, 120 paper steps (30 turns, 1k chars/turn)", value=worst["compressed_paper_total_bytes"] / 1e9,
                           unit="GB", baseline=worst["paper_total_bytes"] / 1e9, baseline_label="uncompressed",
                           note="ratio = compressed / plain size"))
    figs.append(Figure(name="run store per 1,000 paper steps, defaults (30 turns, 1k chars/turn)",
                       value=_per_1000(worst, "compressed_bytes_per_traj") / 1e9, unit="GB",
                       note=f"store.compress_trajectories on; with store.keep_trajectory_steps={keep}: {bounded['30+1k'] / 1e9:.2f} GB"))
    # the default since issue 23: store.compress_trajectories on
    out["store_record_step_s"] = worst["compressed_record_step_s"]
    out["store_record_step_plain_s"] = worst["record_step_s"]
    return figs, out


# ------------------------------------------------------------------------------------------ pool
def _synthetic_tasks(n: int, start: int = 0) -> list[Any]:
    from coevolve_sdk.records import Lineage, Task

    out = []
    for i in range(start, start + n):
        acts = [f'<tool_call>{{"name": "tool_{(i * 7 + j) % 40}", "arguments": {{"path": "dir_{i}/file_{j}.txt", "n": {j}}}}}</tool_call>'
                for j in range(5)]
        out.append(Task(id=f"syn-{i:07d}", env="bfcl-multi-turn", query=f"Please move file {i} into the archive and report line {i % 97}.",
                        origin="synthetic", payload={"initial_config": {"files": {f"f{j}": "x" * 40 for j in range(8)}}, "n": i},
                        reference_actions=acts, lineage=Lineage(parent_task_id=f"seed-{i % 100}", signal_kind="boundary", step_admitted=10)))
    return out


def bench_pool(sizes: list[int]) -> tuple[list[Figure], dict[str, Any]]:
    import numpy as np

    from coevolve_sdk.evolution.pool import SyntheticShareSampler, TaskPool, UniformSampler
    from coevolve_sdk.storage.store import RunStore

    print("task pool (real TaskPool on a real store), per call; 'per step' = what the loop does every step "
          "(sample 32, counts), 'per round' = an evolution round (fingerprints copy, id index, admit 16)")
    print(f"{'tasks':>8} {'fill s':>7} {'open s':>7} {'sample ms':>10} {'share ms':>9} {'counts ms':>10} {'round ms':>9} {'dedup us':>9}")
    out: dict[str, Any] = {}
    per_step_at_max = 0.0
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            store = RunStore(Path(d) / "run.sqlite")
            pool = TaskPool(store)
            t0 = time.perf_counter()
            for i in range(0, n, 5000):
                pool.admit(_synthetic_tasks(min(5000, n - i), i), step=0)
            fill = time.perf_counter() - t0
            t0 = time.perf_counter()
            pool = TaskPool(store)  # what a resume pays
            reopen = time.perf_counter() - t0
            rng = np.random.default_rng(0)
            uni, share = UniformSampler(), SyntheticShareSampler()

            def best(fn: Any, k: int = 5) -> float:
                ts = []
                for _ in range(k):
                    t = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - t)
                return min(ts)

            sample = best(lambda: pool.sample(uni, PAPER_TASKS, rng, 1))
            sample_share = best(lambda: pool.sample(share, PAPER_TASKS, rng, 1))
            counts = best(lambda: (pool.counts(), len(pool)))
            new = iter(range(10))

            def round_() -> None:
                j = next(new)
                _ = {t.id: t for t in pool.tasks}
                fps = pool.fingerprints
                cands = _synthetic_tasks(16, n + 16 * j)
                assert all(c.fingerprint() not in fps for c in cands)
                pool.admit(cands, step=11)

            rnd = best(round_)
            cand = _synthetic_tasks(1, 10 * n)[0]
            fps = pool.fingerprints
            dedup = best(lambda: [cand.fingerprint() in fps for _ in range(1000)]) / 1000
            store.close()
        step_cost = max(sample, sample_share) + counts + rnd / 10  # a round every 10 steps (paper: F = 10)
        per_step_at_max = step_cost
        out[f"pool_{n}"] = {"fill_s": fill, "reopen_s": reopen, "sample_s": sample, "share_sample_s": sample_share,
                            "counts_s": counts, "round_s": rnd, "dedup_s": dedup, "per_step_s": step_cost}
        print(f"{n:>8,} {fill:7.2f} {reopen:7.2f} {1000 * sample:10.2f} {1000 * sample_share:9.2f} {1000 * counts:10.2f} "
              f"{1000 * rnd:9.1f} {1e6 * dedup:9.2f}")
    out["pool_per_step_s"] = per_step_at_max
    return [], out


# ------------------------------------------------------------------------------------- detectors
def bench_detectors(records: int) -> tuple[list[Figure], dict[str, Any]]:
    from coevolve_sdk.evolution.signals import CompetenceHistory
    from coevolve_sdk.records import RolloutGroup, Task, Trajectory
    from signals_throughput import make_detectors, synthesise

    cfg = dict(window=24, theta=5.0, n_min=512, min_count=2)
    steps = synthesise(records, 20_000, PAPER_TASKS, PAPER_GROUP, 4_000, 0)
    dets = make_detectors(**cfg)
    history = CompetenceHistory()
    timed = 0.0
    n = n_signals = 0
    last: list[float] = []
    tasks: dict[str, Task] = {}
    for step, d in enumerate(steps):
        groups, r = [], 0
        for task_id, size in zip(d.task_ids, d.sizes.tolist()):
            task = tasks.get(task_id) or tasks.setdefault(task_id, Task(id=task_id, env="synthetic", query=task_id))
            trajs = [Trajectory(id=f"t{step}-{r + j}", task_id=task_id, step=step, score=float(d.scores[r + j]), success=bool(d.scores[r + j] >= 0.5),
                                action_pattern=d.patterns[r + j]) for j in range(size)]
            groups.append(RolloutGroup(task=task, step=step, trajectories=trajs))
            r += size
        t0 = time.perf_counter()  # what CoEvolveLoop._detect does with a step's groups
        for det in dets:
            n_signals += len(det.observe(groups, history, step))
        for g in groups:
            for t in g.trajectories:
                history.record(g.task.id, step, t.score, t.success)
        dt = time.perf_counter() - t0
        timed += dt
        n += r
        if n > records * 0.9:
            last.append(dt)
    per_step = statistics.median(last) * PAPER_TRAJ_PER_STEP / (n / len(steps))
    print(f"detectors through the loop's path (observe on RolloutGroups + history): {n:,} records in {timed:.1f}s = "
          f"{n / timed:,.0f} records/s; {n_signals:,} signals; last 10% of steps: {1000 * per_step:.1f} ms per 256-record step")
    return [Figure(name="detectors, loop path, records/s", value=n / timed, unit="records/s",
                   note=f"{n:,} records; {1000 * per_step:.1f} ms per paper step at the end")], {
        "detector_records": n, "detector_rate": n / timed, "detector_per_step_s": per_step}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="step,store,pool,detectors")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (make bench): 1x-8x steps, 10^5 detector records")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--detector-records", type=int, default=None)
    add_json_flag(ap)
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    scales = [1, 2, 4, 8] if args.quick else [1, 2, 4, 8, 16]
    records = args.detector_records or (100_000 if args.quick else 1_000_000)
    figures: list[Figure] = []
    params: dict[str, Any] = {"quick": args.quick, "paper_step_s": PAPER_STEP_S}
    if "step" in parts:
        f, p = bench_step(scales, args.group, args.repeat if not args.quick else 2)
        figures += f
        params.update(p)
        print()
    if "store" in parts:
        f, p = bench_store(16 if args.quick else 32, 2 if args.quick else 3)
        figures += f
        params.update(p)
        print()
    if "pool" in parts:
        f, p = bench_pool([1_000, 10_000, 100_000] if not args.quick else [1_000, 10_000, 100_000])
        figures += f
        params.update(p)
        print()
    if "detectors" in parts:
        f, p = bench_detectors(records)
        figures += f
        params.update(p)
        print()
    if {"store", "pool", "detectors"} <= parts:
        overhead = params["store_record_step_s"] + params["pool_per_step_s"] + params["detector_per_step_s"]
        share = overhead / PAPER_STEP_S
        print(f"per paper step (256 trajectories of 30 turns, pool of 10^5 tasks): store {params['store_record_step_s']:.3f}s "
              f"+ pool {params['pool_per_step_s']:.3f}s + detectors {params['detector_per_step_s']:.3f}s = {overhead:.3f}s "
              f"= {100 * share:.3f}% of a paper step ({PAPER_STEP_S:.0f}s, Table 7); goal < 1%")
        figures.append(Figure(name="store + pool + detectors per paper step", value=100 * share, unit="% of step",
                              goal_on="value", goal_op="<=", goal=1.0, note=f"{overhead:.3f}s of {PAPER_STEP_S:.0f}s"))
        if "store_record_step_plain_s" in params:
            c = params["store_record_step_plain_s"] + params["pool_per_step_s"] + params["detector_per_step_s"]
            print(f"  with store.compress_trajectories off: store {params['store_record_step_plain_s']:.3f}s, total {c:.3f}s "
                  f"= {100 * c / PAPER_STEP_S:.3f}% of a paper step")
            figures.append(Figure(name="the same, store not compressed", value=100 * c / PAPER_STEP_S, unit="% of step",
                                  goal_on="value", goal_op="<=", goal=1.0, note=f"{c:.3f}s of {PAPER_STEP_S:.0f}s"))
    write_json(args.json, "scaling", figures, params)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
