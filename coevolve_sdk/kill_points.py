"""Named points where a test can kill a run, to prove that a kill there loses nothing.

``COEVOLVE_TEST_KILL_AT=after_admission:2`` makes the process SIGKILL itself the second time it
reaches ``killpoints.reached("after_admission")``; several specs may be given, separated by
commas (the first one reached fires). Without the variable, ``reached`` costs one dictionary
lookup. The points, in the order a run meets them:

``seed_pool`` (after the seed pool is admitted), ``warm_start`` (inside the warm start, at its
first progress report, or when it returns), ``eval_before`` / ``eval_during`` / ``eval_after``
(an evaluation has rolled out, nothing recorded yet), ``step_recorded`` (a step's rollouts and
signals are in the store), ``round_started`` (a round has consumed its signals),
``after_admission`` (a round's tasks are in the pool), ``checkpoint_begun`` (an empty ``step-NNNNNN.tmp`` exists), ``checkpoint_saved`` (the algorithm has
written its files, nothing committed), ``checkpoint_commit`` (state and manifest written, the
folder not renamed), ``checkpoint_renamed`` (renamed, ``latest`` not yet updated).

The same points can fill the disk instead of killing: with ``COEVOLVE_TEST_FILL_DISK=FILE`` and
``COEVOLVE_TEST_FILL_DISK_AT=checkpoint_begun:2``, the second visit of that point writes ``FILE``
until its filesystem has no byte left (or ``COEVOLVE_TEST_FILL_DISK_LEAVE`` bytes), and the run goes on (the test of a
real, size-limited filesystem, tests/core/test_disk_full.py, frees it by deleting ``FILE``).
"""

from __future__ import annotations

import os
import signal

__all__ = ["reached", "ENV", "FILL_ENV"]

ENV = "COEVOLVE_TEST_KILL_AT"
FILL_ENV = "COEVOLVE_TEST_FILL_DISK_AT"
_seen: dict[str, int] = {}


def _targets(var: str = ENV) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in os.environ.get(var, "").split(","):
        spec = spec.strip()
        if not spec:
            continue
        name, _, n = spec.partition(":")
        out[name] = int(n or 1)
    return out


def reached(name: str) -> None:
    """Count a visit of point ``name``; SIGKILL this process (or fill the disk) if a variable asks for this one."""
    if ENV not in os.environ and FILL_ENV not in os.environ:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _targets(FILL_ENV).get(name) == _seen[name]:
        _fill(os.environ["COEVOLVE_TEST_FILL_DISK"])
    if _targets().get(name) == _seen[name]:
        os.kill(os.getpid(), signal.SIGKILL)


def _fill(path: str) -> None:
    """Append to ``path`` until the filesystem refuses another byte (big blocks, then single
    bytes), or until ``COEVOLVE_TEST_FILL_DISK_LEAVE`` bytes are left free (a disk nearly full)."""
    leave = int(os.environ.get("COEVOLVE_TEST_FILL_DISK_LEAVE", "0") or 0)
    with open(path, "ab", buffering=0) as f:
        while leave > 0:
            st = os.statvfs(path)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                return
            try:
                f.write(b"\0" * min(free - leave, 1 << 20))
            except OSError:
                return
        for block in (1 << 20, 1 << 12, 1):
            chunk = b"\0" * block
            while True:
                try:
                    f.write(chunk)
                except OSError:
                    break
