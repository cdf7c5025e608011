"""Bad configuration gets one paragraph that names the file, the field and the fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import coevolve_cmd
from tests.core.test_loop_cli import write_config


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*coevolve_cmd(), *args], capture_output=True, text=True, env=env, timeout=120)


def test_invalid_yaml(tmp_path: Path, sub_env: dict[str, str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_dir: x\nenvironment: {name: kvstore\npolicy: [\n")
    out = run(["run", str(bad)], sub_env)
    assert out.returncode == 2
    assert str(bad) in out.stderr and "not valid YAML" in out.stderr and "line" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_component_name(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("name: kvstore", "name: kvstor"))
    out = run(["run", str(cfg)], sub_env)
    assert out.returncode == 2
    assert "environment.name" in out.stderr and "'kvstor'" in out.stderr and "kvstore" in out.stderr
    assert "Traceback" not in out.stderr


def test_wrong_field_type(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.steps": "many"})
    out = run(["run", str(cfg)], sub_env)
    assert out.returncode == 2
    assert str(cfg) in out.stderr and "training.steps" in out.stderr and "integer" in out.stderr


def test_wrong_component_option_type(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"environment.options": {"max_steps": "lots"}})
    out = run(["config", "check", str(cfg)], sub_env)
    assert out.returncode == 2
    assert "environment.options.max_steps" in out.stderr


def test_a_component_option_typo_in_run_names_the_users_file(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"environment.options": {"max_steps": "lots"}})
    out = run(["run", str(cfg)], sub_env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert str(cfg) in out.stderr and "environment.options.max_steps" in out.stderr
    assert "run/config.yaml" not in out.stderr  # not the run folder's copy, which the user never wrote


def test_misspelt_field_is_an_error_not_ignored(tmp_path: Path, sub_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, **{"training.stepz": 3})
    out = run(["run", str(cfg)], sub_env)
    assert out.returncode == 2
    assert "training.stepz" in out.stderr and "does not exist" in out.stderr


def test_config_schema_is_json(sub_env: dict[str, str]) -> None:
    import json

    out = run(["config", "schema"], sub_env)
    assert out.returncode == 0
    schema = json.loads(out.stdout)
    assert {"environment", "policy", "algorithm", "detectors", "evolution"} <= set(schema["properties"])
