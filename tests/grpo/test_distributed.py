"""Two real CPU processes (torchrun, gloo DDP) train like one process on all their data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).with_name("dist_script.py")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"})
    env.pop("ACCELERATE_USE_CPU", None)
    return env


def _run(cmd: list[str]) -> None:
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{cmd}\nstdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-6000:]}"


@pytest.mark.slow
def test_two_processes_train_like_one_on_all_the_data(tmp_path, tiny_dir):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    assert torchrun, "torchrun is installed with torch"
    out = tmp_path / "out"
    _run([torchrun, "--standalone", "--nproc_per_node", "2", str(SCRIPT), "dist", str(tiny_dir), str(out)])
    _run([sys.executable, str(SCRIPT), "full", str(tiny_dir), str(out)])
    _run([sys.executable, str(SCRIPT), "half", str(tiny_dir), str(out)])
    assert [(out / f"dist-rank{r}.closed").read_text() for r in (0, 1)] == ["False", "False"]
    infos = [json.loads((out / f"dist-rank{r}.json").read_text()) for r in (0, 1)]
    assert all(i["num_processes"] == 2 and "MULTI_CPU" in i["distributed_type"] for i in infos), infos
    r0, r1 = torch.load(out / "dist-rank0.pt"), torch.load(out / "dist-rank1.pt")
    full, half = torch.load(out / "full-rank0.pt"), torch.load(out / "half-rank0.pt")
    # Gradients were all-reduced: both ranks hold the same weights after warm start and GRPO.
    assert torch.equal(r0["weights"], r1["weights"])
    # Rank 1's data mattered: training on rank 0's share alone ends elsewhere.
    assert (r0["weights"] - half["weights"]).abs().max() > 1e-4
    # The distributed gradient is the single-process gradient on all the data (the loss is
    # normalised with totals over both processes), and not the one on half of it.
    scale = float(full["grad"].abs().max())
    assert scale > 0
    assert torch.allclose(r0["grad"], full["grad"], atol=1e-6 * max(1.0, scale)), float((r0["grad"] - full["grad"]).abs().max())
    assert (r0["grad"] - half["grad"]).abs().max() > 1e-3 * scale
    # Adam amplifies summation-order noise on near-zero gradients, so the weights after several
    # steps agree closely but not bit for bit with the single-process run.
    cos = torch.nn.functional.cosine_similarity(r0["weights"] - half["weights"], full["weights"] - half["weights"], dim=0)
    assert cos > 0.9
