"""The detectors are found through the plugin registry once coevolve-signals is pip-installed."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys

import pytest

from coevolve_sdk.components.registry import Registry
from coevolve_sdk.evolution.signals import SignalDetector


def test_entry_point_is_installed():
    eps = [ep for ep in md.entry_points(group="coevolve") if ep.name == "signals"]
    assert eps, "coevolve-signals is not installed: run `pip install -e plugins/coevolve-signals`"
    assert eps[0].value == "coevolve_signals.plugin"


@pytest.mark.parametrize("name", ["forgetting", "boundary", "rare"])
def test_registry_finds_each_detector(name):
    reg = Registry()
    cls = reg.get("detector", name)
    assert issubclass(cls, SignalDetector)
    assert cls.name == name and cls.kind == name
    info = reg.info("detector", name)
    assert info.plugin == "signals" and info.distribution == "coevolve-signals"
    det = cls(cls.Options(), None)  # built the way the loop builds components
    assert det.state_dict() is not None


def test_registry_builds_from_config_options():
    reg = Registry()
    rare = reg.get("detector", "rare")
    det = rare(rare.Options.model_validate({"theta": 3, "n_min": 64}), None)
    assert det.options.theta == 3.0 and det.options.n_min == 64


def test_plugin_module_imports_no_detector_code():
    """The registry imports every plugin module at start-up; ours must stay cheap."""
    code = (
        "import sys, coevolve_signals.plugin as p; "
        "assert not [m for m in sys.modules if m.startswith('coevolve_signals.') and m != 'coevolve_signals.plugin'], sorted(sys.modules); "
        "print('ok')"
    )
    # no entry points: `import coevolve_sdk` (which the plugin's imports trigger) would otherwise
    # build the registry and call the hook, which imports the detectors by design
    env = {**os.environ, "COEVOLVE_LOAD_PLUGINS": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
