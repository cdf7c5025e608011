"""Every shipped run config validates, components and options included, so the paper-size
configs stay in step with the code even though running them needs GPUs and an API key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import coevolve_cmd

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("config", EXAMPLES, ids=lambda p: p.name)
def test_config_checks(config: Path, sub_env: dict[str, str]) -> None:
    out = subprocess.run([*coevolve_cmd(), "config", "check", str(config)], capture_output=True, text=True, env=sub_env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "valid" in out.stdout
