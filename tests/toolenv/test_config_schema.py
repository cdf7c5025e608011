"""`coevolve config schema` carries every registered component's options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_config_schema_lists_every_component_with_its_options() -> None:
    env = dict(os.environ, COEVOLVE_PLUGIN_MODULES="tests.toolenv.broken_envs", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "coevolve_sdk", "config", "schema"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    assert {"environment", "policy", "algorithm"} <= set(schema["properties"])  # still the RunConfig schema
    listed = subprocess.run([sys.executable, "-m", "coevolve_sdk", "plugins", "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    registered = {(c["kind"], c["name"]) for c in json.loads(listed.stdout)["components"]}
    described = {(kind, name) for kind, table in schema["x-components"].items() for name in table}
    assert described == registered and ("environment", "broken-kv") in described  # a plugin module's components too
    kv = schema["x-components"]["environment"]["kvstore"]
    assert kv["distribution"] == "coevolve-kvstore" and kv["options"]["properties"]["train_tasks"]["default"] == 64
    assert "lr" in schema["x-components"]["algorithm"]["grpo"]["options"]["properties"]
