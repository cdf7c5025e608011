"""The warm start's speed against its floor: a bare forward + backward + AdamW over the same tokens.

The warm start (behaviour cloning on the seed tasks' reference actions) runs through
``GRPO.warm_start`` exactly as a run calls it, on the conversations a run replays (BFCL's
multi-turn tasks with the main job's settings when coevolve-bfcl is installed, else the
key-value example). The floor is what anyone would write to train on those tokens: each
conversation of each step as its own unpadded sequence, ``model(input_ids, labels=input_ids)``,
``backward``, one AdamW step per batch; no padding, no masks, no clipping, nothing else. Both
sides see the same batches (the warm start's own draws), on the same model, interleaved in
rounds so that load from other jobs hits both alike.

    python bench/warm_start.py [--env bfcl|kvstore] [--steps 4] [--rounds 3] [--threads 1] [--json PATH]

Prints real tokens per second of each warm-start layout and of the floor, and their ratios
(goal: the default layout >= 0.9x the floor). Wall-clock figures on a shared machine are
noisy: read the median of the per-round ratios; never assert on them.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402
from grpo_common import tiny_setup  # noqa: E402,F401  (sets the offline environment variables)

#: (label, layout, micro_batch_tokens, output layer on the scored positions only); the first is
#: the default, "one padded batch" is what the warm start did before it had layouts, "full
#: output layer" what it did before the output layer ran on the agent's tokens alone.
VARIANTS: list[tuple[str, str, int, bool]] = [
    ("buckets (default, 2048 tokens)", "buckets", 2048, True),
    ("buckets, full output layer (before)", "buckets", 2048, False),
    ("one padded batch (before)", "buckets", 1 << 30, True),
    ("buckets of 4096 tokens", "buckets", 4096, True),
    ("packed rows of 4096 tokens", "packed", 4096, True),
]


def build(env_name: str, seed: int) -> tuple[Any, Any, list[Any], dict[str, Any]]:
    """(context, policy, tasks with reference actions, description) for the chosen environment."""
    from coevolve_sdk.components.context import RunContext
    from coevolve_sdk.components.registry import Registry
    from coevolve_grpo.policies import TinyPolicy

    reg = Registry()
    if env_name == "bfcl":
        env_cls = reg.get("environment", "bfcl-multi-turn")
        opts = env_cls.Options(category="base", tool_docs="compact", tool_subset="involved", distractors=1, max_steps=8,
                               max_steps_per_turn=5, max_observation_chars=240)
        policy_opts = TinyPolicy.Options(hidden_size=128, layers=2, vocab_size=2048, max_context=2048)
        batch, lr = 8, 5e-3
    else:
        env_cls = reg.get("environment", "kvstore")
        opts = env_cls.Options(max_steps=6, train_tasks=64, test_tasks=16)
        policy_opts = TinyPolicy.Options(hidden_size=64, layers=2)
        batch, lr = 16, 3e-3

    def make_env() -> Any:
        return env_cls(opts, None)

    ctx = RunContext(run_dir=Path("/tmp/coevolve-bench"), seed=seed, make_env=make_env, log=lambda m: None)
    policy = TinyPolicy(policy_opts, ctx)
    ctx.policy = policy
    tasks = [t for t in make_env().tasks("train") if t.reference_actions][:32]
    return ctx, policy, tasks, {"env": env_name, "batch_size": batch, "lr": lr, "hidden": policy_opts.hidden_size}


def floor_segment(module: Any, examples: list[Any], batches: list[list[int]], opt: Any) -> float:
    """The floor over ``batches``: seconds."""
    import torch

    t0 = time.perf_counter()
    for idx in batches:
        for i in idx:
            ids = torch.tensor([examples[i][0]])
            module(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", choices=["bfcl", "kvstore"], default=None, help="default: bfcl when coevolve-bfcl is installed")
    ap.add_argument("--steps", type=int, default=4, help="optimiser steps per timed segment")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    add_json_flag(ap)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from coevolve_grpo.algorithm import GRPO, GRPOOptions, WarmStartOptions
    from coevolve_grpo.packing import micro_batches, sample_batches

    env_name = args.env
    if env_name is None:
        try:
            import coevolve_bfcl  # noqa: F401

            env_name = "bfcl"
        except ImportError:
            env_name = "kvstore"
    t0 = time.perf_counter()
    ctx, policy, tasks, desc = build(env_name, args.seed)
    module = policy.module
    alg = GRPO(GRPOOptions(beta=0.0, cpu=True, seed=args.seed), ctx)
    t1 = time.perf_counter()
    examples = alg.warm_start_examples(tasks)
    prep = time.perf_counter() - t1
    batches = sample_batches(len(examples), args.steps, desc["batch_size"], args.seed + 17)  # the warm start's own draws
    real = sum(len(examples[i][0]) for idx in batches for i in idx)
    lengths = sorted(len(e[0]) for e in examples)
    print(f"{env_name}: tiny qwen3 hidden={desc['hidden']}, {len(examples)} conversations of {lengths[0]}-{lengths[-1]} tokens "
          f"(median {statistics.median(lengths):.0f}), batch {desc['batch_size']}, {args.steps} steps per segment, "
          f"{real} real tokens per segment, threads={args.threads}; set-up {t1 - t0:.0f} s, replaying the examples {prep:.1f} s")
    for label, layout, tokens, _ in VARIANTS:
        padded = sum(len(mb.ids) * max(len(r) for r in mb.ids) for idx in batches
                     for mb in micro_batches([examples[i] for i in idx], layout, tokens))  # type: ignore[arg-type]
        calls = sum(len(micro_batches([examples[i] for i in idx], layout, tokens)) for idx in batches)  # type: ignore[arg-type]
        print(f"  {label:<32} computes {padded / real:5.2f}x the real tokens in {calls / len(batches):.1f} forwards per step")

    floor_opt = torch.optim.AdamW(module.parameters(), lr=desc["lr"])
    start = copy.deepcopy(module.state_dict())
    times: dict[str, list[float]] = {label: [] for label, _, _, _ in VARIANTS}
    times["floor"] = []
    for _ in range(args.rounds):
        for label, layout, tokens, short in VARIANTS:
            module.load_state_dict(start)
            # the short way is decided per model class on first use: reset it, or switch it off
            alg._scored_rows_ok = {} if short else {type(module): False}
            alg.options.warm_start = WarmStartOptions(steps=args.steps, lr=desc["lr"], batch_size=desc["batch_size"],
                                                      layout=layout, micro_batch_tokens=tokens)  # type: ignore[attr-defined]
            m = alg.warm_start(tasks)
            assert m["warm_start_input_tokens"] == real, (m["warm_start_input_tokens"], real)
            times[label].append(m["warm_start_seconds"])
        module.load_state_dict(start)
        times["floor"].append(floor_segment(module, examples, batches, floor_opt))

    floor_best = min(times["floor"])
    print(f"\n{'':<34}{'tok/s (best)':>14}{'tok/s (median)':>16}{'x floor (median of rounds)':>28}")
    print(f"{'floor: bare fwd+bwd+AdamW':<34}{real / floor_best:14.0f}{real / statistics.median(times['floor']):16.0f}")
    figures: list[Figure] = []
    for i, (label, _, _, _) in enumerate(VARIANTS):
        ratios = [f / w for f, w in zip(times["floor"], times[label])]
        ratio = statistics.median(ratios)
        best = real / min(times[label])
        print(f"{label:<34}{best:14.0f}{real / statistics.median(times[label]):16.0f}{ratio:28.2f}")
        figures.append(Figure(
            name=f"warm start, {label}", value=best, unit="tok/s", baseline=real / floor_best,
            baseline_label="bare fwd+bwd+AdamW", ratio=ratio,
            goal_op=">=" if i == 0 else None, goal=0.9 if i == 0 else None,
            note="median of per-round ratios" + ("" if i == 0 else "; for comparison"),
        ))
    print("\ngoal: the default layout >= 0.90x the floor")
    write_json(args.json, "warm_start", figures, {**desc, "steps": args.steps, "rounds": args.rounds, "threads": args.threads,
                                                  "real_tokens_per_segment": real})


if __name__ == "__main__":
    main()
