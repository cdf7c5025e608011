"""Writing a checkpoint's optimizer state: ``save_tree`` against copying every tensor first.

A GRPO checkpoint writes the AdamW moments (twice the model's size) through
``coevolve_grpo.state_files.save_tree``. The baseline is what it did before: copy each tensor
to its own CPU storage, then write (safetensors refuses tensors that share memory). Now only
tensors that need it (views, shared storages, other devices) are copied. Both sides write the
same synthetic state (``--params`` float32 parameters in 100 tensors, two moments each) to the
same disk, interleaved over ``--rounds``.

    python bench/checkpoint_save.py [--params 20000000] [--rounds 3] [--json PATH]

Prints the median seconds of each side, their ratio (goal: save_tree <= 0.8x the copy-first
baseline) and the peak memory each side adds above the state (goal: save_tree at most a tenth
of the state; the baseline adds a whole copy). Wall-clock figures on
a shared machine are noisy; never assert on them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import json
import resource
import subprocess
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Figure, add_json_flag, write_json  # noqa: E402


def copy_first(tree: Any) -> Any:
    import torch

    if isinstance(tree, torch.Tensor):
        return tree.detach().to("cpu", copy=True).contiguous()
    if isinstance(tree, dict):
        return {k: copy_first(v) for k, v in tree.items()}
    return tree


def one_side(side: str, params: int) -> dict[str, float]:
    """Build the state, write it once with ``side``; seconds and peak memory above the state."""
    import torch
    from coevolve_grpo.state_files import save_tree

    per = max(1, params // 100)
    state = {"state": {i: {"step": torch.tensor(1.0), "exp_avg": torch.randn(per), "exp_avg_sq": torch.rand(per)} for i in range(100)},
             "param_groups": [{"lr": 3e-4, "params": list(range(100))}]}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        save_tree(state if side == "save_tree" else copy_first(state), Path(d), "optimizer")
        seconds = time.perf_counter() - t
    extra_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return {"seconds": seconds, "extra_mb": extra_mb}


SIDES = ("save_tree", "copy first (before)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=int, default=20_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # one measurement, in its own process
    add_json_flag(ap)
    args = ap.parse_args()
    if args.side:
        print(json.dumps(one_side(args.side, args.params)))
        return

    runs: dict[str, list[dict[str, float]]] = {k: [] for k in SIDES}
    for _ in range(args.rounds):
        for side in SIDES:  # each in a fresh process, so that peak memory is its own
            out = subprocess.run([sys.executable, __file__, "--side", side, "--params", str(args.params)],
                                 capture_output=True, text=True, check=True)
            runs[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
    extra = {k: statistics.median(r["extra_mb"] for r in v) for k, v in runs.items()}
    mb = 2 * max(1, args.params // 100) * 100 * 4 / 2**20
    for k in SIDES:
        print(f"{k:22s} {med[k]:6.2f} s   peak memory above the state {extra[k]:7.1f} MB   (medians of {args.rounds})")
    print(f"state written: {mb:.0f} MB of moments; ratio save_tree / copy first = {med[SIDES[0]] / med[SIDES[1]]:.2f}")
    figures = [
        Figure(name="optimizer state write", value=med[SIDES[0]], unit="s", baseline=med[SIDES[1]],
               baseline_label="copy every tensor, then write", goal_op="<=", goal=0.8),
        Figure(name="peak memory above the state while writing", value=extra[SIDES[0]], unit="MB",
               baseline=extra[SIDES[1]], baseline_label="copy every tensor, then write", goal_on="value", goal_op="<=",
               goal=round(0.1 * mb, 1), note=f"{mb:.0f} MB of state"),
    ]
    write_json(args.json, "checkpoint_save", figures, {"params": args.params, "rounds": args.rounds})


if __name__ == "__main__":
    main()
