"""Benchmark: the BFCL environment against BFCL's own executor and checker, same run, same calls.

Prints environment steps per second and replays per second, each next to a baseline measured
in the same process on the same ground-truth calls, and the ratio ours/baseline:

* steps: ``env.step`` on the ground-truth agent messages that carry a turn's calls (parse,
  check, call the backend methods; plain-answer messages are run but not timed) vs. BFCL's ``execute_multi_turn_func_call`` on the same turn's call strings (eval on
  cached instances). The steps that end an episode (which run the official grading) are
  excluded here and counted under replays.
* replays: ``env.replay(task, reference_actions)`` (fresh backend state, every step, official
  grading with a fresh model name, cache purge) vs. BFCL executing every turn and then running
  ``multi_turn_checker`` (fresh model name, cache purge).

Run: ``python bench/bfcl_env.py [--category base] [--entries 200] [--repeat 2]``. It never
asserts on time; it is for comparing runs on the same machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid

os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-bench-"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--category", default="base", choices=["base", "miss_func", "miss_param", "long_context"])
    ap.add_argument("--entries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the figures as JSON (bench/run_all.py)")
    args = ap.parse_args()

    from coevolve_bfcl import _bfcl
    from coevolve_bfcl.env import BFCLMultiTurnEnv

    utils = _bfcl.module("eval_checker.multi_turn_eval.multi_turn_utils")
    execute = utils.execute_multi_turn_func_call
    env = BFCLMultiTurnEnv(category=args.category, max_steps=10_000)
    tasks = env.tasks("all")[: args.entries]

    # ---------------------------------------------------------------- ours
    env_steps = env_step_time = 0.0
    env_replays = 0
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        for t in tasks:
            env.reset(options={"task": t})
            for a in t.reference_actions[:-1]:  # the last one ends the episode and grades it
                if "<tool_call>" not in a:  # plain answers (turn ends) are run but not timed
                    env.step(a)
                    continue
                s = time.perf_counter()
                env.step(a)
                env_step_time += time.perf_counter() - s
                env_steps += 1
    stepping_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        for t in tasks:
            r = env.replay(t, t.reference_actions)
            assert r.score == 1.0, t.id
            env_replays += 1
    env_replay_time = time.perf_counter() - t0

    # ---------------------------------------------------------------- baseline: BFCL directly
    base_steps = base_step_time = 0.0
    base_replays = 0
    base_replay_time = 0.0
    long_context = args.category == "long_context"
    for _ in range(args.repeat):
        for t in tasks:
            e = t.payload["entry"]
            name = "bench_" + uuid.uuid4().hex[:12]
            for turn in e["ground_truth"]:
                if not turn:
                    continue
                s = time.perf_counter()
                execute(turn, e["initial_config"], e["involved_classes"], name, e["id"], long_context=long_context)
                base_step_time += time.perf_counter() - s
                base_steps += 1
            _bfcl.purge_instances(name)
    for _ in range(args.repeat):
        for t in tasks:
            e = t.payload["entry"]
            s = time.perf_counter()
            name = "bench_" + uuid.uuid4().hex[:12]
            for turn in e["ground_truth"]:
                if turn:
                    execute(turn, e["initial_config"], e["involved_classes"], name, e["id"], long_context=long_context)
            _bfcl.purge_instances(name)
            res = _bfcl.official_check([[turn] if turn else [] for turn in e["ground_truth"]], e)
            base_replay_time += time.perf_counter() - s
            assert res["valid"], e["id"]
            base_replays += 1

    ours_sps = env_steps / env_step_time
    base_sps = base_steps / base_step_time
    ours_rps = env_replays / env_replay_time
    base_rps = base_replays / base_replay_time
    print(f"BFCL multi_turn_{args.category}: {len(tasks)} entries x {args.repeat}")
    print(f"{'metric':<34}{'ours':>12}{'baseline':>12}{'ratio':>9}   baseline")
    print(f"{'environment steps/s':<34}{ours_sps:>12.1f}{base_sps:>12.1f}{ours_sps / base_sps:>9.2f}   "
          f"bfcl execute_multi_turn_func_call, one call per turn's call list")
    print(f"{'replays/s (with official grading)':<34}{ours_rps:>12.1f}{base_rps:>12.1f}{ours_rps / base_rps:>9.2f}   "
          f"bfcl executor on every turn + multi_turn_checker")
    print(f"(stepping loop wall time incl. resets: {stepping_wall:.2f}s for {int(env_steps)} steps)")
    if args.json:
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from benchlib import Figure, write_json

        write_json(Path(args.json), "bfcl_env", [
            Figure(name="BFCL env steps/s", value=ours_sps, unit="steps/s", baseline=base_sps,
                   baseline_label="BFCL execute_multi_turn_func_call"),
            Figure(name="BFCL env replays/s (official grading)", value=ours_rps, unit="replays/s", baseline=base_rps,
                   baseline_label="BFCL executor + multi_turn_checker"),
        ], {"category": args.category, "entries": len(tasks), "repeat": args.repeat})


if __name__ == "__main__":
    main()
