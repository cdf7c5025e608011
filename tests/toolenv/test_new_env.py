"""`coevolve new env NAME` writes a plugin that installs, passes its own test and trains."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coevolve_sdk.authoring.scaffold import ScaffoldError, new_env, plugin_names
from tests.docs.runner import overlay_env, run_bounded


def test_names_derived_from_the_environment_name() -> None:
    assert plugin_names("pet-shop") == {"name": "pet-shop", "dist": "coevolve-pet-shop", "pkg": "coevolve_pet_shop", "cls": "PetShopEnv"}
    for bad in ("", "Pet", "pet_shop", "1pet", "pet-", "pet shop"):
        with pytest.raises(ScaffoldError, match="lowercase letters and digits"):
            plugin_names(bad)


def test_generated_files_are_valid_python_and_name_the_plugin(tmp_path: Path) -> None:
    root = new_env("pet-shop", tmp_path)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["README.md", "coevolve_pet_shop/__init__.py", "coevolve_pet_shop/env.py", "coevolve_pet_shop/plugin.py",
                     "pet-shop-tiny.yaml", "pyproject.toml", "tests/test_env.py"]
    for py in root.rglob("*.py"):
        ast.parse(py.read_text())
    assert 'pet-shop = "coevolve_pet_shop.plugin"' in (root / "pyproject.toml").read_text()
    assert "environment: {name: pet-shop" in (root / "pet-shop-tiny.yaml").read_text()
    with pytest.raises(ScaffoldError, match="already exists and is not empty.*--force"):
        new_env("pet-shop", tmp_path)
    new_env("pet-shop", tmp_path, force=True)


@pytest.mark.slow
def test_new_env_installs_passes_its_test_and_trains(tmp_path: Path) -> None:
    env = overlay_env(tmp_path)
    vbin = tmp_path / "venv" / "bin"
    (vbin / "pytest").write_text(f"#!/bin/sh\nexec {vbin / 'python'} -m pytest \"$@\"\n")
    (vbin / "pytest").chmod(0o755)

    def sh(cmd: str, cwd: Path = tmp_path, timeout: int = 900) -> str:
        r = run_bounded(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env, timeout=timeout)
        assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    out = sh("coevolve new env demo && pip install -q -e ./coevolve-demo && pytest -q coevolve-demo")
    assert "2 passed" in out
    listed = sh("coevolve plugins --json")
    assert '"distribution": "coevolve-demo"' in listed
    summary = sh("coevolve run demo-tiny.yaml --quiet --set training.steps=3", cwd=tmp_path / "coevolve-demo")
    assert '"steps": 3' in summary
    assert (tmp_path / "coevolve-demo" / "runs" / "demo-tiny" / "report.html").exists()
    # the scaffold's own settings make its world learn: held-out success above zero
    import json
    import sqlite3

    con = sqlite3.connect(tmp_path / "coevolve-demo" / "runs" / "demo-tiny" / "run.sqlite")
    try:
        after = [json.loads(d) for (d,) in con.execute("SELECT data FROM evals WHERE phase = 'after'")]
    finally:
        con.close()
    assert after and after[-1]["success_rate"] >= 0.5, after  # 1.000 measured (seed 0, 67a3055)
