"""Plugin discovery: failures and name clashes are named, and the other plugins keep working."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from coevolve_sdk.errors import UnknownComponentError
from tests.conftest import coevolve_cmd


def fake_distribution(root: Path, dist: str, ep_name: str, module: str, code: str) -> None:
    """A real installed-distribution layout (dist-info with entry points) on a sys.path folder."""
    (root / f"{module}.py").write_text(textwrap.dedent(code))
    info = root / f"{dist.replace('-', '_')}-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(f"[coevolve]\n{ep_name} = {module}\n")


def plugins_json(env: dict[str, str]) -> dict:
    out = subprocess.run([*coevolve_cmd(), "plugins", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_plugin_that_raises_on_import_is_named_and_others_load(tmp_path: Path, sub_env: dict[str, str]) -> None:
    fake_distribution(tmp_path, "coevolve-broken", "broken", "broken_plugin", "raise RuntimeError('missing API key file')\n")
    sub_env["PYTHONPATH"] = f"{tmp_path}:{sub_env['PYTHONPATH']}"
    data = plugins_json(sub_env)
    fail = next(f for f in data["failures"] if f["plugin"] == "broken")
    assert fail["distribution"] == "coevolve-broken"
    assert "RuntimeError: missing API key file" in fail["error"]
    assert "COEVOLVE_DISABLE_PLUGINS=broken" in fail["hint"]
    assert any(c["name"] == "kvstore" for c in data["components"])
    # the human-readable listing says the same in one paragraph
    out = subprocess.run([*coevolve_cmd(), "plugins"], capture_output=True, text=True, env=sub_env, timeout=120)
    assert "Plugin 'broken' (distribution coevolve-broken) failed to load" in out.stderr
    # and disabling it silences it
    sub_env["COEVOLVE_DISABLE_PLUGINS"] = "broken"
    assert not [f for f in plugins_json(sub_env)["failures"] if f["plugin"] == "broken"]


def test_two_plugins_registering_one_name(tmp_path: Path, sub_env: dict[str, str]) -> None:
    code = """
        from coevolve_sdk.components.hooks import hookimpl
        from coevolve_kvstore.env import KVStoreEnv

        class Clash(KVStoreEnv):
            name = "clash"

        @hookimpl
        def register_environments():
            return [Clash]
    """
    fake_distribution(tmp_path, "coevolve-one", "one", "plugin_one", code)
    fake_distribution(tmp_path, "coevolve-two", "two", "plugin_two", code)
    sub_env["PYTHONPATH"] = f"{tmp_path}:{sub_env['PYTHONPATH']}"
    data = plugins_json(sub_env)
    clash = next(c for c in data["conflicts"] if c["name"] == "clash")
    assert sorted(clash["plugins"]) == ["one", "two"]
    assert any(c["name"] == "kvstore" for c in data["components"])
    cfg = tmp_path / "c.yaml"
    cfg.write_text("run_dir: r\nenvironment: {name: clash}\npolicy: {name: toy-menu}\nalgorithm: {name: toy-reinforce}\nplugins: [tests.core.toy_plugin]\n")
    out = subprocess.run([*coevolve_cmd(), "config", "check", str(cfg)], capture_output=True, text=True, env=sub_env, timeout=120)
    assert out.returncode == 2
    assert "'one' (coevolve-one)" in out.stderr and "'two' (coevolve-two)" in out.stderr and "COEVOLVE_DISABLE_PLUGINS" in out.stderr


def test_load_plugins_selects(sub_env: dict[str, str]) -> None:
    sub_env["COEVOLVE_LOAD_PLUGINS"] = ""
    data = plugins_json(sub_env)
    assert not any(c["name"] == "kvstore" for c in data["components"])
    assert any(c["name"] == "random-explorer" for c in data["components"])  # built-ins always load


def test_import_is_light() -> None:
    import sys

    code = "import sys, coevolve_sdk; print(','.join(m for m in ('torch','transformers','litellm','vllm','accelerate') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_importing_a_plugin_module_first_still_registers_everything() -> None:
    import sys

    code = (
        "from coevolve_kvstore.env import KVStoreEnv\n"
        "import gymnasium\n"
        "from coevolve_sdk.components.registry import get_registry\n"
        "assert gymnasium.make('coevolve/kvstore-v0').unwrapped.name == 'kvstore'\n"
        "r = get_registry()\n"
        "assert 'kvstore' in r.names('environment'), r.failures\n"
        "assert not [f for f in r.failures if f.plugin == 'kvstore'], r.failures\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_misspelt_hook_implementation_is_rejected_with_its_name(tmp_path: Path, monkeypatch) -> None:
    """pluggy never calls a hook implementation whose name matches no hook: without
    check_pending() such a plugin would load, register nothing and say nothing."""
    from coevolve_sdk.components.registry import Registry

    (tmp_path / "typo_plugin.py").write_text(textwrap.dedent("""
        from coevolve_sdk.components.hooks import hookimpl
        from coevolve_sdk.evolution.teacher import RandomExplorer

        class Mine(RandomExplorer):
            name = "mine"

        @hookimpl
        def register_teacher():
            return [Mine]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry(load_entry_points=False, extra_modules=["typo_plugin"])
    fail = next(f for f in reg.failures if f.plugin == "typo_plugin")
    assert "'register_teacher'" in fail.error and "did you mean 'register_teachers'?" in fail.error
    assert "register_environments" in fail.hint and "on_step_end" in fail.hint  # the valid names
    assert "COEVOLVE_DISABLE_PLUGINS=typo_plugin" in fail.hint
    assert "typo_plugin" not in reg.plugins  # rejected as a whole, not half-registered
    # asking for its component names the failure instead of a bare "unknown name"
    with pytest.raises(UnknownComponentError, match="register_teacher"):
        reg.get("teacher", "mine")
    # the other plugins are untouched
    assert "random-explorer" in reg.names("teacher")


def test_one_list_of_component_kinds_matches_the_registration_hooks() -> None:
    """Every registration hook is a component kind and every kind has a config slot."""
    from coevolve_sdk.components import hooks
    from coevolve_sdk.components.base import KINDS
    from coevolve_sdk.config import RunConfig

    registration = {n for n in vars(hooks) if n.startswith("register_") and n != "register_commands"}
    assert {k.hook for k in KINDS} == registration
    for k in KINDS:
        model: type = RunConfig
        for part in k.config_path.split("."):
            field = model.model_fields[part]
            model = field.annotation
        assert model is not None, k


def test_a_missing_well_known_component_names_its_package(sub_env: dict[str, str], tmp_path: Path) -> None:
    sub_env["COEVOLVE_LOAD_PLUGINS"] = ""  # as if no plugin distribution were installed
    cfg = tmp_path / "c.yaml"
    cfg.write_text("run_dir: r\nenvironment: {name: kvstore}\npolicy: {name: tiny}\nalgorithm: {name: grpo}\n")
    out = subprocess.run([*coevolve_cmd(), "config", "check", str(cfg)], capture_output=True, text=True, env=sub_env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "environment.name" in out.stderr and "coevolve-kvstore" in out.stderr
    assert "pip install ./examples/plugins/coevolve-kvstore" in out.stderr
    assert "Traceback" not in out.stderr
