"""One full GRPO step (rollout + update) of coevolve-grpo against TRL's GRPOTrainer.

Same tiny Qwen3 (same initial weights and tokenizer), same prompt, group size, generation
length and temperature, both on this machine's CPU (or GPU when present). Also times this
plugin's update phase against a bare forward+backward+AdamW over exactly the same tokens.

    python bench/grpo_vs_trl.py [--steps 5] [--prompts 8] [--group 8] [--tokens 24] [--threads 2]

Prints seconds per step, generated tokens per second and the ratios. Wall-clock numbers on
a shared machine are noisy: read best-of-N, never assert on them.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402
from grpo_common import summary, tiny_setup, timed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--skip-trl", action="store_true")
    add_json_flag(ap)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from coevolve_sdk import EnvPool, RolloutConfig, collect_groups
    from coevolve_grpo.algorithm import GRPO, GRPOOptions
    from coevolve_grpo.testing import PickToolEnv

    ctx, policy, env = tiny_setup(args.hidden)
    init_state = copy.deepcopy(policy.model.state_dict())
    task = env.target_task()
    _, info = env.reset(options={"task": task})
    prompt_text = policy.render(info["messages"], info["tools"])
    prompt_len = len(policy.encode_text(prompt_text))
    n_seq = args.prompts * args.group
    print(f"tiny qwen3 hidden={args.hidden} params={sum(p.numel() for p in policy.model.parameters())/1e6:.2f}M "
          f"vocab={len(policy.tokenizer)} prompt={prompt_len} tokens, {args.prompts} prompts x {args.group} = {n_seq} "
          f"completions of <= {args.tokens} tokens, threads={args.threads}, device={'cuda' if torch.cuda.is_available() else 'cpu'}")

    # ---------------------------------------------------------------- this plugin
    alg = GRPO(GRPOOptions(lr=1e-6, beta=0.0, micro_batch_size=n_seq, cpu=not torch.cuda.is_available()), ctx)
    pool = EnvPool(lambda: PickToolEnv())
    settings = RolloutConfig(group_size=args.group, max_new_tokens=args.tokens, temperature=0.9)
    gen_tokens: list[int] = []
    state = {"i": 0}

    def plugin_step():
        state["i"] += 1
        groups = collect_groups(policy, pool, [task] * args.prompts, settings, state["i"], seed=state["i"])
        gen_tokens.append(sum(t.info["generated_tokens"] for g in groups for t in g.trajectories))
        alg.step(groups)
        return groups

    ours, groups = timed(plugin_step, args.steps, warmup=1)
    ours_tok = statistics.median(gen_tokens[1:])
    print(f"coevolve-grpo full step: {summary(ours)}; {ours_tok:.0f} generated tokens/step "
          f"-> {ours_tok / min(ours):.0f} tok/s (best)")

    # ---------------------------------------------------------------- update phase vs bare fwd+bwd
    model = policy.model
    seqs = [t for g in groups for t in g.trajectories]
    width = max(len(t.token_ids) for t in seqs)
    pad = policy.tokenizer.pad_token_id
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros((len(seqs), width))
    for r, t in enumerate(seqs):
        ids[r, : len(t.token_ids)] = torch.tensor(t.token_ids)
        attn[r, : len(t.token_ids)] = 1
        mask[r, : len(t.token_ids)] = torch.tensor(t.loss_mask, dtype=torch.float32)
    bare_opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def bare():
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
        loss = -(lp * mask[:, 1:]).sum() / mask.sum()
        loss.backward()
        bare_opt.step()
        bare_opt.zero_grad(set_to_none=True)

    alg_ref = GRPO(GRPOOptions(lr=1e-6, beta=1e-3, micro_batch_size=n_seq, cpu=not torch.cuda.is_available()), ctx)
    # Interleave the three so that a burst of load on a shared machine hits all of them.
    bare_t, upd_ref, updates = [], [], []
    bare()
    alg_ref.step(groups)
    for _ in range(args.steps):
        bare_t += timed(bare, 1, warmup=0)[0]
        updates += timed(lambda: alg.step(groups), 1, warmup=0)[0]
        upd_ref += timed(lambda: alg_ref.step(groups), 1, warmup=0)[0]
    n_tok = int(attn.sum())
    print(f"update phase (beta=0): {summary(updates)}; bare forward+backward+AdamW on the same {n_tok} tokens: {summary(bare_t)}")
    print(f"  ratio update/bare = {min(updates) / min(bare_t):.2f}x (goal <= 1.15x); with the KL reference (beta=1e-3): "
          f"{min(upd_ref) / min(bare_t):.2f}x")
    figures = [
        Figure(name="GRPO update vs bare fwd+bwd+AdamW", value=min(updates), unit="s", baseline=min(bare_t),
               baseline_label="bare forward+backward+AdamW, same tokens", goal_op="<=", goal=1.15),
        Figure(name="GRPO update with KL reference vs bare", value=min(upd_ref), unit="s", baseline=min(bare_t),
               baseline_label="bare forward+backward+AdamW, same tokens", note="beta=1e-3"),
    ]
    params = {k: getattr(args, k) for k in ("steps", "prompts", "group", "tokens", "threads", "hidden")}
    write_json(args.json, "grpo_vs_trl", figures, params)

    if args.skip_trl:
        return
    # ---------------------------------------------------------------- TRL
    try:
        import datasets
        from trl import GRPOConfig, GRPOTrainer
        from transformers import TrainerCallback
    except ImportError as e:
        print(f"TRL not available ({e}); pip install trl to compare")
        return
    trl_model = copy.deepcopy(model)
    trl_model.load_state_dict(init_state)
    rnd = random.Random(0)

    def reward(completions, **kw):
        return [rnd.random() for _ in completions]

    class Clock(TrainerCallback):
        def __init__(self):
            self.times, self.t0 = [], 0.0

        def on_step_begin(self, a, s, c, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, a, s, c, **kw):
            self.times.append(time.perf_counter() - self.t0)

    clock = Clock()
    data = datasets.Dataset.from_dict({"prompt": [prompt_text] * (n_seq * (args.steps + 2))})
    cfg = GRPOConfig(
        output_dir="/tmp/coevolve-bench-trl", per_device_train_batch_size=n_seq, num_generations=args.group,
        max_completion_length=args.tokens, temperature=0.9, top_k=0, top_p=1.0, beta=0.0, learning_rate=1e-6,
        max_steps=args.steps + 1, logging_steps=1000, save_strategy="no", report_to="none",
        use_cpu=not torch.cuda.is_available(), bf16=False, fp16=False, gradient_accumulation_steps=1,
        num_iterations=1, disable_dropout=True, seed=0, dataloader_num_workers=0,
    )
    tok = copy.deepcopy(policy.tokenizer)
    trainer = GRPOTrainer(model=trl_model, reward_funcs=[reward], args=cfg, train_dataset=data, processing_class=tok, callbacks=[clock])
    trainer.train()
    trl_times = clock.times[1:]
    comp_tok = n_seq * args.tokens  # an untrained model rarely stops early; TRL pads to the longest
    print(f"TRL GRPOTrainer full step: {summary(trl_times)}; ~{comp_tok} generated tokens/step -> {comp_tok / min(trl_times):.0f} tok/s (best)")
    print(f"  speed-up coevolve-grpo / TRL (best step time) = {min(trl_times) / min(ours):.2f}x (goal >= 1.3x); "
          f"median {statistics.median(trl_times) / statistics.median(ours):.2f}x")
    figures.insert(0, Figure(name="GRPO full step vs TRL GRPOTrainer", value=min(ours), unit="s", baseline=min(trl_times),
                             baseline_label="TRL GRPOTrainer, same model and batch", ratio=min(trl_times) / min(ours),
                             goal_op=">=", goal=1.3, note="ratio = speed-up (TRL time / ours)"))
    write_json(args.json, "grpo_vs_trl", figures, params)


if __name__ == "__main__":
    main()
