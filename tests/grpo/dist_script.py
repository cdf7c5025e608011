"""Run by test_distributed.py, under ``torchrun --nproc_per_node 2`` or as one process.

Usage: python dist_script.py MODE TINY_DIR OUT_DIR   (MODE: dist | full | half)

Every process first rolls out the same fixed data from the same initial weights: for each
step s and each "rank share" r, one batch of groups sampled with seed (s, r). Under torchrun,
process r trains on share r; ``full`` trains one process on both shares; ``half`` on share 0.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)

from coevolve_sdk.components.context import RunContext  # noqa: E402
from coevolve_sdk import EnvPool, RolloutConfig, collect_groups  # noqa: E402
from coevolve_grpo.algorithm import GRPO, GRPOOptions, WarmStartOptions  # noqa: E402
from coevolve_grpo.policies import TinyPolicy  # noqa: E402
from coevolve_grpo.testing import PickToolEnv  # noqa: E402

STEPS, SHARES = 2, 2


def main() -> None:
    mode, tiny_dir, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ctx = RunContext(run_dir=out, seed=0, make_env=lambda: PickToolEnv(max_steps=2), log=lambda m: None)
    pol = TinyPolicy(TinyPolicy.Options(init_from=tiny_dir), ctx)
    ctx.policy = pol
    alg = GRPO(GRPOOptions(lr=5e-3, beta=0.01, micro_batch_size=3, mini_batches=2, cpu=True,
                           warm_start=WarmStartOptions(steps=2, lr=1e-3, batch_size=4)), ctx)
    acc = alg.accelerator
    info = {"mode": mode, "num_processes": acc.num_processes, "distributed_type": str(acc.distributed_type), "rank": alg.processes.rank}
    if mode == "dist":
        assert acc.num_processes == 2, info
    env = PickToolEnv(max_steps=2)
    tasks = [env.target_task("press_blue"), env.target_task("press_red")]
    pool = EnvPool(lambda: PickToolEnv(max_steps=2))
    settings = RolloutConfig(group_size=4, max_new_tokens=10, temperature=1.0)
    data = {}
    for s in range(STEPS):
        for r in range(SHARES):
            torch.manual_seed(1000 + 10 * s + r)
            data[s, r] = collect_groups(pol, pool, tasks, settings, s, seed=s * 7 + r)
    # Give the updates something to push on whatever the sampled rewards were.
    for (s, r), groups in data.items():
        for gi, g in enumerate(groups):
            for j, t in enumerate(g.trajectories):
                t.score = float((j + gi + r + s) % 2)
    # As in the core loop: the warm start runs on the main process only; the others receive
    # its weights at the next collective call (the tasks' broadcast).
    if alg.processes.is_main_process:
        alg.warm_start(env.tasks())
    if mode == "dist":
        # The core loop's plumbing: main samples, everyone receives; lists concatenate in rank order.
        got = alg.processes.broadcast(["task-a", "task-b"] if alg.processes.is_main_process else None)
        assert got == ["task-a", "task-b"], got
        gathered = alg.processes.gather([alg.processes.rank, alg.processes.rank])
        assert gathered == [0, 0, 1, 1], gathered
    # The first update's gradient, before any optimiser step (DDP leaves the average in .grad).
    if mode == "dist":
        first = data[0, alg.processes.rank]
    elif mode == "full":
        first = data[0, 0] + data[0, 1]
    else:
        first = data[0, 0]
    alg.loss_and_grad(first)
    grad = torch.cat([p.grad.detach().reshape(-1) for p in acc.unwrap_model(alg.model).parameters()])
    alg.optimizer.zero_grad(set_to_none=True)
    for s in range(STEPS):
        if mode == "dist":
            groups = data[s, alg.processes.rank]
        elif mode == "full":
            groups = data[s, 0] + data[s, 1]
        else:
            groups = data[s, 0]
        alg.step(groups)
    flat = torch.cat([p.detach().reshape(-1) for p in acc.unwrap_model(alg.model).parameters()])
    out.mkdir(parents=True, exist_ok=True)
    torch.save({"weights": flat, "grad": grad}, out / f"{mode}-rank{alg.processes.rank}.pt")
    (out / f"{mode}-rank{alg.processes.rank}.json").write_text(json.dumps(info))
    alg.processes.barrier()
    # Finished processes tear their group down themselves (left to interpreter exit, gloo can
    # abort a rank); closing twice is harmless.
    alg.processes.close()
    alg.processes.close()
    import torch.distributed as dist

    (out / f"{mode}-rank{alg.processes.rank}.closed").write_text(str(dist.is_initialized()))


if __name__ == "__main__":
    main()
