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
