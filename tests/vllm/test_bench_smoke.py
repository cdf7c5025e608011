"""The GPU bench script runs on CPU as a smoke check: HF phase only, vLLM parts skipped with
a message, the table printed last."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_bench_runs_on_cpu_with_a_tiny_model(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHON"] = sys.executable
    env["CUDA_VISIBLE_DEVICES"] = ""  # force the CPU path even where a GPU exists
    proc = subprocess.run(
        ["bash", str(REPO / "bench/gpu/run_checks.sh"), "--size", "tiny", "--steps", "1", "--workdir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout.strip().splitlines()
    table = [line for line in out if line.startswith("| ")]
    assert table[0].startswith("| phase | steps | rollout tok/s")
    assert table[-1].startswith("| hf | 1 |")
    assert out[-1].startswith("vLLM parts skipped:")  # the table and its notes come last
    assert (tmp_path / "ckpt" / "config.json").exists()
