"""Reading a run folder without writing to it or taking its writer's lock.

The runner looks at run folders whose runs may be writing, and a summary may be made while an
experiment still runs, so the store is opened read-only (``RunStore(read_only=True)``): nothing
here can change a run or block its writer. A store that cannot be read (a run killed while
creating it, a damaged file) reads as status ``unreadable``: not finished, so it is resumed or
started again, never counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coevolve_sdk.storage.store import RunStore, StoreDamaged
from coevolve_sdk.evolution.rounds import PROBE_COUNTS
from coevolve_sdk.evolution.validation import EVAL_REQUEST_REASON

__all__ = ["RunData", "run_status", "read_run"]


def _open(run_dir: Path) -> RunStore | None:
    db = run_dir / "run.sqlite"
    return RunStore(db, read_only=True) if db.is_file() else None


def run_status(run_dir: Path) -> str | None:
    """'finished', 'running' (also: stopped while running), 'starting', 'unreadable', or None
    when the folder has no store (the run never started)."""
    try:
        store = _open(run_dir)
    except StoreDamaged:
        return "unreadable"
    if store is None:
        return None
    try:
        return str(store.get_meta("status", "starting"))
    finally:
        store.close()


@dataclass
class RunData:
    """What an experiment summary needs from one run."""

    status: str | None
    evals: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    signal_counts: list[tuple[int, str, int]] = field(default_factory=list)
    pool_growth: list[tuple[int, str, int]] = field(default_factory=list)
    steps_done: int = 0
    #: tasks evolution admitted, and how many of them training sampled at least once
    admitted_tasks: int = 0
    trained_on_admitted: int = 0
    #: candidates validation rejected for asking an evaluation task's request
    rejected_eval_requests: int = 0
    #: what each start of the run ran on (coevolve_sdk.storage.machine; empty for runs written before it)
    machines: list[dict[str, Any]] = field(default_factory=list)


def read_run(run_dir: Path) -> RunData:
    try:
        store = _open(run_dir)
    except StoreDamaged:
        return RunData(status="unreadable")
    if store is None:
        return RunData(status=None)
    try:
        raw = store.rounds()
        rounds = [
            {"round": int(r["round"]), "step": int(r["step"]), "by_kind": dict(r.get("by_kind") or {}),
             "accepted": int(r.get("accepted") or 0), "candidates": int(r.get("candidates") or 0),
             "short_of_cap": r.get("short_of_cap"),
             **{k: int(r.get(k) or 0) for k in PROBE_COUNTS}}
            for r in raw
        ]
        use = store.admitted_task_use()
        leaks = sum(int((r.get("rejection_reasons") or {}).get(EVAL_REQUEST_REASON, 0)) for r in raw)
        return RunData(str(store.get_meta("status", "starting")), store.evals(), rounds, store.signal_counts(),
                       store.pool_growth(), len(store.steps_done()), use["admitted"], use["trained_on"], leaks,
                       list(store.get_meta("machines") or []))
    finally:
        store.close()
