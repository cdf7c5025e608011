"""A third party's view: a fresh virtualenv, the core and the example plugin from their folders."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_pip_install_example_plugin_in_a_fresh_venv(tmp_path: Path) -> None:
    vdir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(vdir)
    py = vdir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    r = subprocess.run([*pip, str(REPO)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    # before the plugin: the core works and knows no kvstore
    listed = subprocess.run([str(vdir / "bin" / "coevolve"), "plugins", "--json"], capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert "kvstore" not in {c["name"] for c in json.loads(listed.stdout)["components"]}
    r = subprocess.run([*pip, str(REPO / "examples" / "plugins" / "coevolve-kvstore")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    listed = subprocess.run([str(vdir / "bin" / "coevolve"), "plugins", "--json"], capture_output=True, text=True, timeout=300)
    data = json.loads(listed.stdout)
    kv = next(c for c in data["components"] if c["name"] == "kvstore")
    assert kv["distribution"] == "coevolve-kvstore" and kv["version"] == "0.1.0" and kv["kind"] == "environment"
    code = "import gymnasium, coevolve_sdk; e = gymnasium.make('coevolve/kvstore-v0'); print(type(e.unwrapped).__name__)"
    made = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == "KVStoreEnv"
    # the light core pulled in no heavy stack
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout.lower()
    for heavy in ("torch", "transformers", "litellm", "vllm"):
        assert f"\n{heavy}==" not in "\n" + frozen
    assert sys.version_info >= (3, 11)
