"""Tokens per second of the core rollout loop with the tiny policy vs a raw ``model.generate``.

Same model, same prompts (the pick-tool opening, rendered by the chat template), same batch and
the same number of new tokens. The rollout side is the whole ``coevolve_sdk.training.rollout.collect_groups``
(environment reset and step, prompt rendering, logprob bookkeeping, Trajectory records); the raw
side is ``model.generate(do_sample=True)`` on pre-tokenised, left-padded prompts. An untrained
model rarely emits the end-of-turn token, so both run to the length limit; tokens/s counts the
tokens actually generated on each side.

    python bench/rollout_vs_generate.py [--episodes 64] [--tokens 64] [--repeat 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402
from grpo_common import tiny_setup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    add_json_flag(ap)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
    from coevolve_grpo.testing import PickToolEnv

    ctx, policy, env = tiny_setup(args.hidden)
    model = policy.model
    task = env.target_task()
    pool = EnvPool(lambda: PickToolEnv())
    settings = RolloutConfig(group_size=args.episodes, max_new_tokens=args.tokens, temperature=0.9)
    _, info = env.reset(options={"task": task})
    prompt = policy.encode_prompt(info["messages"], info["tools"])
    batch = {
        "input_ids": torch.tensor([prompt] * args.episodes, device=policy.device),
        "attention_mask": torch.ones((args.episodes, len(prompt)), dtype=torch.long, device=policy.device),
    }
    tok = policy.tokenizer

    def rollout():
        groups = collect_groups(policy, pool, [task], settings, 0)
        return sum(t.info["generated_tokens"] for t in groups[0].trajectories)

    def raw():
        with torch.inference_mode():
            out = model.generate(**batch, do_sample=True, temperature=0.9, top_k=0, top_p=1.0, max_new_tokens=args.tokens,
                                 pad_token_id=tok.pad_token_id, eos_token_id=policy.eos_token_id)
        new = out[:, len(prompt):]
        # Count up to and including the first end-of-turn token, as the rollout does.
        n = 0
        for row in new.tolist():
            n += row.index(policy.eos_token_id) + 1 if policy.eos_token_id in row else len(row)
        return n

    rollout(), raw()
    r_rates, g_rates = [], []
    for _ in range(args.repeat):  # interleaved, so load bursts hit both
        t0 = time.perf_counter(); n = rollout(); r_rates.append(n / (time.perf_counter() - t0))
        t0 = time.perf_counter(); n = raw(); g_rates.append(n / (time.perf_counter() - t0))
    print(f"tiny qwen3 hidden={args.hidden}, {args.episodes} episodes x {args.tokens} new tokens, prompt {len(prompt)} tokens, threads={args.threads}")
    print(f"core rollout loop (collect_groups + tiny policy): best {max(r_rates):.0f} tok/s, median {sorted(r_rates)[len(r_rates)//2]:.0f}")
    print(f"raw model.generate:                              best {max(g_rates):.0f} tok/s, median {sorted(g_rates)[len(g_rates)//2]:.0f}")
    print(f"ratio rollout / raw generate: {max(r_rates) / max(g_rates):.2f} (best), "
          f"{sorted(r_rates)[len(r_rates)//2] / sorted(g_rates)[len(g_rates)//2]:.2f} (median); goal >= 0.8")
    write_json(args.json, "rollout_vs_generate", [
        Figure(name="rollout loop vs raw model.generate", value=max(r_rates), unit="tok/s", baseline=max(g_rates),
               baseline_label="model.generate, same prompts and lengths", goal_op=">=", goal=0.8),
    ], {k: getattr(args, k) for k in ("episodes", "tokens", "repeat", "threads", "hidden")})


if __name__ == "__main__":
    main()
