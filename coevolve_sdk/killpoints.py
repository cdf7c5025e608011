"""Named points where a test can kill a run, to prove that a kill there loses nothing.

``COEVOLVE_TEST_KILL_AT=after_admission:2`` makes the process SIGKILL itself the second time it
reaches ``killpoints.reached("after_admission")``; several specs may be given, separated by
commas (the first one reached fires). Without the variable, ``reached`` costs one dictionary
lookup. The points, in the order a run meets them:

``seed_pool`` (after the seed pool is admitted), ``warm_start`` (inside the warm start, at its
first progress report, or when it returns), ``eval_before`` / ``eval_during`` / ``eval_after``
(an evaluation has rolled out, nothing recorded yet), ``step_recorded`` (a step's rollouts and
signals are in the store), ``round_started`` (a round has consumed its signals),
``after_admission`` (a round's tasks are in the pool), ``checkpoint_saved`` (the algorithm has
written its files, nothing committed), ``checkpoint_commit`` (state and manifest written, the
folder not renamed), ``checkpoint_renamed`` (renamed, ``latest`` not yet updated).
"""

from __future__ import annotations

import os
import signal

__all__ = ["reached", "ENV"]

ENV = "COEVOLVE_TEST_KILL_AT"
_seen: dict[str, int] = {}


def _targets() -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in os.environ.get(ENV, "").split(","):
        spec = spec.strip()
        if not spec:
            continue
        name, _, n = spec.partition(":")
        out[name] = int(n or 1)
    return out


def reached(name: str) -> None:
    """Count a visit of point ``name``; SIGKILL this process if the variable asks for this one."""
    if ENV not in os.environ:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _targets().get(name) == _seen[name]:
        os.kill(os.getpid(), signal.SIGKILL)
