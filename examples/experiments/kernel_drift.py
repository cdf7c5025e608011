"""Same seed, same code, other CPU kernels: do the weights still match?

    python examples/experiments/kernel_drift.py

Trains the main job's tiny model shape (Qwen3, 128 wide, two layers, a 1,024-token vocabulary)
for 40 AdamW steps on random tokens, all draws seeded, once in a child process per kernel set
PyTorch can dispatch to on this CPU (``ATEN_CPU_CAPABILITY``: default, avx2, and avx512 where the
CPU has it), and prints the final loss and the sum of the weights of each. Equal sums mean the
kernels compute bit for bit alike; different sums mean a run's weights, and from there its
sampled rollouts and its held-out numbers, depend on the CPU a run happens to get, not only on
its seed. That is why docs/evidence.md compares arms paired by seed on one machine and says which
machine ran them: a seed's numbers repeat exactly on the same kind of CPU, not on another.
"""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = r"""
import torch
torch.set_num_threads(1)
from transformers import Qwen3Config, Qwen3ForCausalLM
cfg = Qwen3Config(vocab_size=1024, hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, max_position_embeddings=1024, tie_word_embeddings=True,
                  pad_token_id=0, eos_token_id=1, bos_token_id=None)
torch.manual_seed(0)
model = Qwen3ForCausalLM(cfg)
draws = torch.Generator().manual_seed(1)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
for _ in range(40):
    ids = torch.randint(2, 1024, (8, 64), generator=draws)
    logits = model(input_ids=ids, use_cache=False).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 1024), ids[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
total = float(sum(p.detach().double().sum() for p in model.parameters()))
print(f"{torch.backends.cpu.get_cpu_capability():8s} loss {loss.item():.9f}  weight sum {total:.9f}")
"""


def main() -> int:
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    kernels = ["", "avx2"] + (["avx512"] if "avx512f" in flags else [])
    sums = []
    for cap in kernels:
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env.pop("ATEN_CPU_CAPABILITY", None)
        if cap:
            env["ATEN_CPU_CAPABILITY"] = cap
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True).stdout.strip()
        print(f"ATEN_CPU_CAPABILITY={cap or '(default)':10s} {out}")
        sums.append(out.rsplit(" ", 1)[-1])
    print("the kernels agree bit for bit" if len(set(sums)) == 1 else
          "the kernels disagree: the same seed gives other weights on a CPU that dispatches differently")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
