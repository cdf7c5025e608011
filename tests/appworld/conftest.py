"""Fixtures for the AppWorld plugin's tests.

The isolated runtime (AppWorld's own virtualenv plus the synthetic task set, built at test
time from the installed package) is created once and cached outside the repository, keyed by
the pinned AppWorld version: ``$COEVOLVE_APPWORLD_TEST_HOME`` or
``~/.cache/coevolve-tests/appworld-<version>``. The first session pays about a minute (pip
install + ``appworld install`` + building the task set); later sessions reuse it. Setting
``COEVOLVE_SKIP_APPWORLD=1`` skips the tests that need it (for machines without PyPI access);
otherwise a failing set-up fails the tests, it does not skip them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coevolve_appworld import APPWORLD_VERSION


@pytest.fixture(scope="session")
def appworld_home() -> Path:
    if os.environ.get("COEVOLVE_SKIP_APPWORLD") == "1":
        pytest.skip("COEVOLVE_SKIP_APPWORLD=1")
    from coevolve_appworld.runtime import setup_runtime

    home = Path(os.environ.get("COEVOLVE_APPWORLD_TEST_HOME") or Path.home() / ".cache" / "coevolve-tests" / f"appworld-{APPWORLD_VERSION}")
    setup_runtime(home, synthetic=True)
    yield home
    from coevolve_appworld.pool import close_shared_pools

    close_shared_pools()


@pytest.fixture()
def make_env(appworld_home):
    from coevolve_appworld.env import AppWorldEnv

    made = []

    def make(**options):
        env = AppWorldEnv(home=str(appworld_home), **options)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()
