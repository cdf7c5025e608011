"""A third party's view: a fresh virtualenv, the core and the example plugin from their folders."""

from __future__ import annotations

import json
import os
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
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]  # no .pyc of every dependency up front
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
    # the core runs without the LLM teacher; a config naming it says which package to install
    assert "litellm" not in {c["name"] for c in json.loads(listed.stdout)["components"]}
    teacher_cfg = tmp_path / "teacher.yaml"
    teacher_cfg.write_text("run_dir: r\nplugins: [tests.core.toy_plugin]\nenvironment: {name: kvstore}\n"
                           "policy: {name: toy-menu}\nalgorithm: {name: toy-reinforce}\nteacher: {name: litellm}\n")
    toy_env = {**os.environ, "PYTHONPATH": str(REPO)}  # the toy components of the test suite
    checked = subprocess.run([str(vdir / "bin" / "coevolve"), "config", "check", str(teacher_cfg)],
                             capture_output=True, text=True, timeout=300, env=toy_env)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "teacher.name" in checked.stderr and "coevolve-litellm" in checked.stderr, checked.stderr
    assert "pip install ./plugins/coevolve-litellm" in checked.stderr and "Traceback" not in checked.stderr
    # installing the plugin adds the teacher (without litellm itself here: registering is light)
    r = subprocess.run([*pip, "--no-deps", str(REPO / "plugins" / "coevolve-litellm")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    checked = subprocess.run([str(vdir / "bin" / "coevolve"), "config", "check", str(teacher_cfg)],
                             capture_output=True, text=True, timeout=300, env=toy_env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    listed = subprocess.run([str(vdir / "bin" / "coevolve"), "plugins", "--json"], capture_output=True, text=True, timeout=300)
    teacher = next(c for c in json.loads(listed.stdout)["components"] if c["name"] == "litellm")
    assert teacher["kind"] == "teacher" and teacher["distribution"] == "coevolve-litellm"
    # the light core pulled in no heavy stack
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout.lower()
    for heavy in ("torch", "transformers", "litellm", "vllm"):
        assert f"\n{heavy}==" not in "\n" + frozen
    assert sys.version_info >= (3, 11)
