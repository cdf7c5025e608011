"""Settings every test shares: offline, deterministic, and the repo importable in subprocesses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One torch/OpenMP thread per test process and per subprocess it starts: the suite runs on
# parallel workers (make test), and threads beyond the cores only slow everyone down.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# Property tests are derandomised by default, so a CI run is repeatable and its verdict does not
# depend on luck or on how loaded the machine is (no per-example deadline). To hunt for new
# counterexamples, run with HYPOTHESIS_PROFILE=explore (fresh random examples on every run).
settings.register_profile("repeatable", derandomize=True, deadline=None, database=None, print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def sub_env() -> dict[str, str]:
    """Environment for running `coevolve` as a user would, with the test plugins importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    return env


def coevolve_cmd() -> list[str]:
    """The installed `coevolve` console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "coevolve"
    return [str(script)] if script.exists() else [sys.executable, "-m", "coevolve_sdk"]


# --- Running in parallel -------------------------------------------------------------------------
# `make test` runs the suite on pytest-xdist workers (`-n auto --dist loadgroup`). Two things keep
# that fast and correct, for tests added later too:
#
# * Tests that use a module-scoped fixture (a finished run that several tests read, a loaded
#   model) run on one worker together, so the fixture is built once, not once per worker; so do
#   tests marked `xdist_group(name)`. (xdist's own loadgroup cannot group under pytest 9, which
#   ignores the renamed node ids it relies on; the scheduler below groups by a table the workers
#   write instead.)
# * The most expensive work goes first (longest-processing-time first), so no long test starts
#   last while the other worker idles. A test's estimate is its measured CPU seconds in
#   tests/durations.json, else 30 s when it is marked `slow`, else 1 s. To measure again, run
#   pytest with COEVOLVE_TEST_TIMES=times.jsonl, then `python scripts/test_durations.py times.jsonl`.
#
# Nothing is deselected or skipped by this; without xdist, pytest's order is kept.

DURATIONS = REPO / "tests" / "durations.json"
_GROUPS_KEY = "coevolve_groups_file"


def _group_of(item: pytest.Item) -> str | None:
    """The work unit a test must share with others: its xdist_group, or its module when it uses
    a module-scoped fixture."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(info, "names_closure", ()):
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope == "module":
            return item.nodeid.split("::", 1)[0]
    return None


def _estimate(item: pytest.Item, table: dict[str, float]) -> float:
    known = table.get(item.nodeid)
    if known is not None:
        return known
    return 30.0 if item.get_closest_marker("slow") else 1.0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or _GROUPS_KEY not in workerinput:  # not one of make test's workers
        return
    import json

    table: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    units: dict[str, list[int]] = {}
    groups: dict[str, str] = {}
    for i, item in enumerate(items):
        group = _group_of(item)
        if group is not None:
            groups[item.nodeid] = "group:" + group
        units.setdefault(groups.get(item.nodeid, item.nodeid), []).append(i)
    cost = {unit: sum(_estimate(items[i], table) for i in idx) for unit, idx in units.items()}
    # every worker computes the same order and table (xdist requires identical collections)
    order = sorted(units, key=lambda u: (-cost[u], units[u][0]))
    items[:] = [items[i] for u in order for i in units[u]]
    path = Path(workerinput[_GROUPS_KEY])
    tmp = path.with_name(f"{path.name}.{workerinput['workerid']}")
    tmp.write_text(json.dumps(groups))
    tmp.replace(path)


class _GroupedScheduling:
    """xdist plug-in of the controller: hands each worker the path for the group table, and
    schedules work units (a group, or one test) in the workers' order."""

    def __init__(self) -> None:
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="coevolve-xdist-"))
        self.path = self.dir / "groups.json"

    def pytest_configure_node(self, node) -> None:  # type: ignore[no-untyped-def]
        node.workerinput[_GROUPS_KEY] = str(self.path)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):  # type: ignore[no-untyped-def]
        if config.getvalue("dist") != "loadgroup":
            return None
        import json

        from xdist.scheduler import LoadGroupScheduling

        path = self.path
        config.option.loadscopereorder = False  # keep the workers' order: most expensive first

        class Scheduling(LoadGroupScheduling):
            _groups: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self._groups is None:  # written by the workers before scheduling starts
                    self._groups = json.loads(path.read_text()) if path.exists() else {}
                return self._groups.get(nodeid) or super()._split_scope(nodeid)

        return Scheduling(config, log)

    def pytest_unconfigure(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput") and config.getvalue("numprocesses"):
        config.pluginmanager.register(_GroupedScheduling(), "coevolve-grouped-scheduling")


# Opt-in measurement: COEVOLVE_TEST_TIMES=FILE appends, per test, the CPU seconds of the test
# process and of the child processes it waited for, and the wall seconds (setup to teardown).
_TIMES = os.environ.get("COEVOLVE_TEST_TIMES")


def _cpu_seconds() -> tuple[float, float]:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    if not _TIMES:
        yield
        return
    import json
    import time

    own, kids = _cpu_seconds()
    t0 = time.perf_counter()
    yield
    own2, kids2 = _cpu_seconds()
    record = {"id": item.nodeid, "outcome": getattr(item, "_coevolve_outcome", "passed"), "cpu": round(own2 - own + kids2 - kids, 2),
              "children": round(kids2 - kids, 2), "wall": round(time.perf_counter() - t0, 2)}
    with open(_TIMES, "a") as f:
        f.write(json.dumps(record) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    report = (yield).get_result()
    if _TIMES and (report.failed or report.skipped):  # the worst phase's outcome, for the timing record
        if getattr(item, "_coevolve_outcome", "passed") != "failed":
            item._coevolve_outcome = report.outcome  # type: ignore[attr-defined]

