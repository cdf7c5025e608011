"""A cache of warm-started weights, shared by runs that would compute the very same warm start.

Why: in an experiment every arm of one seed starts from the same model, the same seed pool and
the same warm-start settings, so their warm starts are bit-identical (the warm start draws its
batches from a generator seeded by the run seed alone and uses no other randomness). Computing
it once per seed instead of once per arm saves most of a CPU experiment's time and changes no
result. The key is a digest of everything the result depends on: the initial weights, the
tokenised training examples, the warm-start settings, the seed, and the arithmetic: the torch
version, the device, and on a CPU its model, PyTorch's kernel set and the thread count (other
kernels or another thread count round differently, and a thousand updates later the weights are
not the same: a cache copied from another machine, or filled by `make demo`'s two threads before
an experiment's one-thread runs, must miss, not hand over another computation's result). A
different anything is a different entry.

Entries are data only (safetensors weights and a JSON of the warm start's metrics), written to a
temporary folder and renamed into place; a lock per key makes concurrent runs with the same key
wait for the first instead of computing it twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

__all__ = ["warm_start_key", "arithmetic", "cache_lock", "load_entry", "save_entry"]


def warm_start_key(module: Any, examples: list[tuple[list[int], list[int]]], settings: dict[str, Any], seed: int) -> str:
    import torch

    h = hashlib.sha256()
    h.update(json.dumps({"settings": settings, "seed": seed, **arithmetic(module)}, sort_keys=True).encode())
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(str(tensor.dtype).encode())
        h.update(tensor.detach().to("cpu").contiguous().numpy().tobytes() if tensor.dtype != torch.bfloat16
                 else tensor.detach().to("cpu").float().numpy().tobytes())
    for ids, mask in examples:
        h.update(json.dumps([ids, mask]).encode())
    return h.hexdigest()[:32]


def arithmetic(module: Any) -> dict[str, Any]:
    """What decides the rounding of a warm start besides its inputs: the torch version, the
    device, and on a CPU the CPU's model, PyTorch's kernel set and the thread count (as a run
    records them: ``coevolve_sdk.machine_facts``)."""
    import torch

    from coevolve_sdk import machine_facts

    device = next(module.parameters()).device
    out: dict[str, Any] = {"torch": torch.__version__, "device": device.type}
    if device.type == "cpu":
        facts = machine_facts()
        out |= {k: facts.get(k) for k in ("cpu", "torch_cpu_kernels", "torch_threads")}
    elif device.type == "cuda":
        out["gpu"] = str(torch.cuda.get_device_name(device))
    return out


@contextlib.contextmanager
def cache_lock(root: Path, key: str) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released by the OS if the process dies
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def load_entry(root: Path, key: str, module: Any) -> dict[str, float] | None:
    """Load a cached warm start into ``module``; None when there is no complete entry."""
    from safetensors.torch import load_file

    entry = root / key
    weights, meta = entry / "weights.safetensors", entry / "metrics.json"
    if not (weights.is_file() and meta.is_file()):
        return None
    state = load_file(str(weights), device=str(next(module.parameters()).device))
    missing, unexpected = module.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if m in dict(module.named_parameters())]:
        raise ValueError(f"the cached warm start in {entry} does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]}); "
                         f"delete that folder")
    return {k: float(v) for k, v in json.loads(meta.read_text()).items()}


def save_entry(root: Path, key: str, module: Any, metrics: dict[str, float]) -> None:
    from safetensors.torch import save_file

    tmp = root / f"{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in module.state_dict().items()}
    # tied weights share storage: keep one name per storage (the module ties them again on load)
    seen: dict[int, str] = {}
    for k in list(state):
        ptr = state[k].data_ptr()
        if ptr in seen:
            del state[k]
        else:
            seen[ptr] = k
    save_file(state, str(tmp / "weights.safetensors"))
    (tmp / "metrics.json").write_text(json.dumps(metrics))
    final = root / key
    if final.exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return
    os.replace(tmp, final)
