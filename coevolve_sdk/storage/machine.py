"""The computer and software a run ran on, recorded in its store.

A run follows its seed, so the same command repeats a seed's numbers exactly, but only on the
same kind of computer with the same packages: PyTorch picks its CPU kernels by the processor's
instruction set (``torch.backends.cpu.get_cpu_capability()``), and kernels that add in another
order round differently. Over a warm start of a thousand updates and sampled rollouts, those
last-digit differences become other held-out numbers for the same seed
(``examples/experiments/kernel_drift.py`` shows the first step of it). Whoever reads or audits a
result needs to know which machine gave it, and an experiment whose runs ran on different
machines should say so: its arms are still comparable in distribution, but a seed's digits no
longer repeat. So every start of a run (fresh or resumed) appends what it ran on to the store's
``machines`` meta entry, and ``coevolve experiment`` lists the machines of its runs.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "NOT_MACHINE", "machine_facts", "machine_label", "machine_part", "record_start", "source_commit"]

#: The packages whose version decides a run's numbers (beside the coevolve distributions).
PACKAGES = ("torch", "transformers", "tokenizers", "accelerate", "numpy")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _packages() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("coevolve"):
            found[name] = dist.version
    return dict(sorted(found.items()))


_SHA = re.compile(r"[0-9a-f]{40}")


def source_commit(package_dir: Path | None = None) -> str | None:
    """The git commit checked out where ``coevolve_sdk`` was imported from, read from the
    checkout's files (``.git/HEAD``, its ref, ``packed-refs``; a worktree's ``.git`` file is
    followed): no git process is started. None for an installed wheel or anything unreadable.
    Uncommitted edits are not seen: the commit says which code, not that it was clean."""
    try:
        root = (package_dir or Path(__file__).resolve().parents[1]).parent
        dot = root / ".git"
        if dot.is_file():
            text = dot.read_text().strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = (root / text[len("gitdir:"):].strip()).resolve()
        elif dot.is_dir():
            gitdir = dot
        else:
            return None
        head = (gitdir / "HEAD").read_text().strip()
        if _SHA.fullmatch(head):
            return head
        if not head.startswith("ref:"):
            return None
        ref = head[len("ref:"):].strip()
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        for base in (gitdir, common):
            if (base / ref).is_file():
                sha = (base / ref).read_text().strip()
                return sha if _SHA.fullmatch(sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                    return parts[0]
    except OSError:
        return None
    return None


def machine_facts() -> dict[str, Any]:
    """CPU model, cores, PyTorch's CPU kernel set and thread count, the GPU (if any), Python,
    the versions of the packages that decide the numbers and ``source_commit`` (the git commit of
    the checkout ``coevolve_sdk`` runs from, when it runs from one). Only reads; never fails (a
    fact it cannot find is left out; PyTorch's facts only when the process has imported it).

    What a run records at each start; a plugin that caches a computation keys it on the facts
    that decide its rounding (coevolve-grpo's warm-start cache takes the CPU model from here)."""
    facts: dict[str, Any] = {"cpu": _cpu_model(), "cores": os.cpu_count(), "system": f"{platform.system()} {platform.machine()}",
                             "python": platform.python_version()}
    torch = sys.modules.get("torch")  # only if the run uses it: importing it here would cost others seconds
    if torch is not None:
        try:
            facts["torch_cpu_kernels"] = str(torch.backends.cpu.get_cpu_capability())
            facts["torch_threads"] = int(torch.get_num_threads())
            if torch.cuda.is_available():
                facts["gpu"] = str(torch.cuda.get_device_name(0))
        except Exception:
            pass
    facts["packages"] = _packages()
    commit = source_commit()
    if commit is not None:
        facts["source_commit"] = commit
    return facts


def machine_label(facts: dict[str, Any]) -> str:
    """One line for people: ``Intel(R) Xeon(R) ..., 2 cores, torch kernels AVX512, 1 torch thread, torch 2.13.0+cpu, ...``."""
    parts = [str(facts.get("cpu", "unknown CPU")), f"{facts.get('cores', '?')} cores"]
    if facts.get("gpu"):
        parts.append(str(facts["gpu"]))
    if facts.get("torch_cpu_kernels"):
        parts.append(f"torch kernels {facts['torch_cpu_kernels']}")
    if facts.get("torch_threads"):
        parts.append(f"{facts['torch_threads']} torch thread{'s' if facts['torch_threads'] != 1 else ''}")
    pk = facts.get("packages") or {}
    parts += [f"{n} {pk[n]}" for n in ("torch", "transformers") if n in pk]
    return ", ".join(parts)


#: Facts of a start that do not tell machines apart (when it started, which code it ran).
NOT_MACHINE = ("step", "started", "source_commit")


def machine_part(start: dict[str, Any]) -> dict[str, Any]:
    """A recorded start's facts without what does not tell machines apart (``NOT_MACHINE``)."""
    return {k: v for k, v in start.items() if k not in NOT_MACHINE}


def record_start(store: Any, step: int) -> None:
    """Append this start's machine to the store's ``machines`` list (``step``: where training
    resumes, 0 for a fresh run)."""
    entry = {"step": int(step), "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **machine_facts()}
    store.set_meta("machines", [*(store.get_meta("machines") or []), entry])
