"""GPU checks for rollouts: GRPO steps with the HF policy in bf16, then (when vLLM is
importable) the same steps with vLLM rollouts, the logprob agreement after every sync, and
rollout tokens per second of vLLM against the HF policy (goal: >= 10x).

Installs nothing and downloads nothing: the model is a Qwen3 built from a config with
coevolve-grpo's offline tokenizer (``coevolve_vllm.testing.build_tiny_checkpoint``); the task is
coevolve-grpo's pick-tool environment; the algorithm is coevolve-grpo's GRPO.

    python bench/gpu/run_checks.py                  # a GPU machine (size "small")
    python bench/gpu/run_checks.py --size tiny      # CPU smoke check: vLLM parts are skipped

Prints progress lines, then a short table last. Never asserts on time.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SIZES: dict[str, dict[str, int]] = {
    # hidden, layers, heads, kv heads, vocab, tasks per step, group size, new tokens per turn
    "tiny": dict(hidden=32, layers=2, heads=4, kv=2, vocab=512, tasks=2, group=4, new=8),
    "small": dict(hidden=512, layers=8, heads=8, kv=4, vocab=1024, tasks=8, group=8, new=64),
    "medium": dict(hidden=1024, layers=16, heads=16, kv=8, vocab=1024, tasks=16, group=8, new=96),
}


def log(msg: str) -> None:
    print(msg, flush=True)


def vllm_status() -> tuple[bool, str]:
    """Whether vLLM can run here, and why not."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA device (vLLM is CUDA-only)"
    try:
        import vllm  # noqa: F401
        from vllm import LLM  # noqa: F401
    except Exception as e:
        return False, f"vllm is not importable ({type(e).__name__}: {e})"
    return True, "vllm " + getattr(sys.modules["vllm"], "__version__", "?")


def run_phase(name: str, policy: Any, ctx: Any, args: argparse.Namespace, sz: dict[str, int]) -> dict[str, Any]:
    """``args.steps`` GRPO steps: rollouts with ``policy``, one optimisation step each."""
    import torch

    from coevolve_grpo.algorithm import GRPO, GRPOOptions
    from coevolve_grpo.testing import PickToolEnv
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups

    ctx.policy = policy
    algo = GRPO(GRPOOptions(lr=args.lr, beta=0.0, micro_batch_size=args.micro_batch, cpu=not torch.cuda.is_available()), ctx)
    env = PickToolEnv(max_steps=2)
    tasks = [env.tasks()[i % len(env.tasks())] for i in range(sz["tasks"])]
    envs = EnvPool(lambda: PickToolEnv(max_steps=2))
    settings = RolloutConfig(group_size=sz["group"], max_new_tokens=sz["new"], temperature=1.0, max_context_tokens=1024)
    gen_tokens, gen_seconds, step_seconds, rewards = 0, 0.0, 0.0, []
    probes: list[tuple[float, float, float]] = []
    path = "-"
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        groups = collect_groups(policy, envs, tasks, settings, step, seed=step)
        t1 = time.perf_counter()
        policy.before_update()  # as the loop does: the vLLM engine sleeps while the trainer works
        metrics = algo.step(groups)
        if hasattr(policy, "last_sync"):  # the vLLM policy: sync, probe and report the path
            m = policy.after_update()
            probes.append((m.get("vllm/probe_logprob_max_abs_diff", float("nan")),
                           m.get("vllm/probe_logprob_mean_abs_diff", float("nan")), m.get("vllm/probe_ok", 0.0)))
            path = policy.last_sync.path if policy.last_sync else "-"
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        toks = sum(tr.info.get("generated_tokens", 0) for g in groups for tr in g.trajectories)
        if step > 1 or args.steps == 1:  # the first step includes warm-up (CUDA graphs, allocator)
            gen_tokens += toks
            gen_seconds += t1 - t0
            step_seconds += t2 - t0
        reward = sum(tr.score for g in groups for tr in g.trajectories) / max(1, sum(len(g.trajectories) for g in groups))
        rewards.append(reward)
        extra = f", probe max|dlogp| {probes[-1][0]:.3g} mean {probes[-1][1]:.3g}" if probes else ""
        log(f"[{name}] step {step}: {toks} tokens in {t1 - t0:.2f}s, update {t2 - t1:.2f}s, "
            f"reward {reward:.2f}, loss {metrics.get('loss', float('nan')):.4g}{extra}")
    envs.close()
    timed = max(1, args.steps - 1) if args.steps > 1 else 1
    return {
        "phase": name,
        "steps": args.steps,
        "tok_s": gen_tokens / gen_seconds if gen_seconds > 0 else float("nan"),
        "step_s": step_seconds / timed,
        "reward": rewards[-1] if rewards else float("nan"),
        "probe_max": max((p[0] for p in probes), default=float("nan")),
        "probe_mean": max((p[1] for p in probes), default=float("nan")),
        "probe_ok": f"{sum(p[2] for p in probes):.0f}/{len(probes)}" if probes else "-",
        "path": path,
        "algo": algo,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    ap.add_argument("--sleep-level", type=int, choices=[0, 1, 2], default=1)
    ap.add_argument("--workdir", default=None, help="Where to write the checkpoint (default: a temp dir).")
    args = ap.parse_args(argv)

    import torch

    from coevolve_grpo.policies import HFPolicy, HFPolicyOptions
    from coevolve_sdk.components.context import RunContext
    from coevolve_vllm.testing import build_tiny_checkpoint

    sz = SIZES[args.size]
    cuda = torch.cuda.is_available()
    dtype = "bfloat16" if cuda else "float32"
    if not cuda:
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    log(f"device: {device}; torch {torch.__version__}; size {args.size} {sz}; dtype {dtype}")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="coevolve-gpu-"))
    ckpt = build_tiny_checkpoint(work / "ckpt", hidden_size=sz["hidden"], layers=sz["layers"], heads=sz["heads"],
                                 kv_heads=sz["kv"], vocab_size=sz["vocab"], dtype=dtype)
    log(f"checkpoint: {ckpt}")
    rows: list[dict[str, Any]] = []
    notes: list[str] = []

    torch.manual_seed(0)
    ctx = RunContext(run_dir=work / "hf", seed=0, log=log)
    hf = HFPolicy(HFPolicyOptions(model=str(ckpt), dtype=dtype, device="auto", max_context=1024), ctx)
    rows.append(run_phase("hf", hf, ctx, args, sz))
    del rows[-1]["algo"], hf, ctx
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()

    ok, why = vllm_status()
    if not ok:
        notes.append(f"vLLM parts skipped: {why}")
        log(f"SKIP vLLM: {why}")
    else:
        try:
            from coevolve_vllm.policy import VLLMPolicy, VLLMPolicyOptions

            torch.manual_seed(0)
            ctx = RunContext(run_dir=work / "vllm", seed=0, log=log)
            pol = VLLMPolicy(VLLMPolicyOptions(
                model=str(ckpt), dtype=dtype, device="auto", max_context=1024,
                gpu_memory_utilization=args.gpu_memory_utilization, sleep_level=args.sleep_level,
            ), ctx)
            rows.append(run_phase("vllm", pol, ctx, args, sz))
            del rows[-1]["algo"]
        except Exception as e:
            traceback.print_exc()
            notes.append(f"vLLM phase failed: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------ the table, last
    print()
    print("| phase | steps | rollout tok/s | s/step | final reward | probe max abs dlogp | probe mean | probe ok | sync path |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['phase']} | {r['steps']} | {r['tok_s']:.0f} | {r['step_s']:.2f} | {r['reward']:.2f} | "
              f"{r['probe_max']:.3g} | {r['probe_mean']:.3g} | {r['probe_ok']} | {r['path']} |")
    if len(rows) == 2 and rows[0]["tok_s"] > 0:
        ratio = rows[1]["tok_s"] / rows[0]["tok_s"]
        print(f"vLLM / HF rollout tokens per second: {ratio:.1f}x (goal >= 10x: {'met' if ratio >= 10 else 'not met'})")
    for n in notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
