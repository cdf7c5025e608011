"""`make test`'s parallel schedule (tests/conftest.py): on two pytest-xdist workers, tests that share
a module-scoped fixture run on one worker and build it once, an `xdist_group` stays together, and
the most expensive work (tests/durations.json, else the `slow` mark) starts first."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SUITE = {
    "test_shared.py": '''
import os, pytest

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with open(os.environ["LOG"], "a") as f:
        f.write(f"build {os.environ['PYTEST_XDIST_WORKER']}\\n")
    return 1

@pytest.mark.parametrize("i", range(4))
def test_reads(built, i):
    with open(os.environ["LOG"], "a") as f:
        f.write(f"shared {os.environ['PYTEST_XDIST_WORKER']}\\n")
''',
    "test_grouped.py": '''
import os, pytest

pytestmark = pytest.mark.xdist_group("together")

@pytest.mark.parametrize("i", range(3))
def test_member(i):
    with open(os.environ["LOG"], "a") as f:
        f.write(f"group {os.environ['PYTEST_XDIST_WORKER']}\\n")
''',
    "test_plain.py": '''
import os, pytest

@pytest.mark.parametrize("i", range(6))
def test_cheap(i):
    with open(os.environ["LOG"], "a") as f:
        f.write(f"cheap{i} {os.environ['PYTEST_XDIST_WORKER']}\\n")

def test_costly():
    with open(os.environ["LOG"], "a") as f:
        f.write(f"costly {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.slow
def test_marked_slow():
    with open(os.environ["LOG"], "a") as f:
        f.write(f"slow {os.environ['PYTEST_XDIST_WORKER']}\\n")
''',
}


def test_groups_stay_together_and_the_most_expensive_start_first(tmp_path: Path) -> None:
    pytest.importorskip("xdist", reason="the dev extra installs pytest-xdist")
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tests / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    for name, body in SUITE.items():
        (tests / name).write_text(body)
    # the durations table makes test_costly the most expensive unit, above the slow mark's 30 s
    (tests / "durations.json").write_text(json.dumps({"tests/test_plain.py::test_costly": 100.0}))
    log = tmp_path / "log.txt"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "tests"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**_env(), "LOG": str(log)})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = [line.split() for line in log.read_text().splitlines()]
    by_kind: dict[str, set[str]] = {}
    for kind, worker in lines:
        by_kind.setdefault(kind, set()).add(worker)
    assert [k for k, _ in lines].count("build") == 1, "the module-scoped fixture was built more than once"
    assert len(by_kind["shared"]) == 1 and by_kind["shared"] == by_kind["build"]
    assert len(by_kind["group"]) == 1
    # each worker's first test is one of the two most expensive units
    firsts = {}
    for kind, worker in lines:
        firsts.setdefault(worker, kind)
    assert set(firsts.values()) == {"costly", "slow"}, lines


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("COEVOLVE_TEST_TIMES", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env
