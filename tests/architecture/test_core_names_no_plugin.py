"""The core names no plugin: which components exist, their kinds and their count come from the
registry and the components themselves.

Why: a core that tests ``kind == "rare"`` or lists plugin names goes stale the day a plugin is
renamed or a new one is written (``registry.WELL_KNOWN`` once lacked the warehouse world), and a
third-party detector could never be treated like the paper's three. What a plugin provides is
declared in its own ``pyproject.toml`` (``[tool.coevolve.provides]``), which the core reads to
say which package to install.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from coevolve_sdk import get_registry

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIRS = sorted([*REPO.glob("plugins/*/pyproject.toml"), *REPO.glob("examples/plugins/*/pyproject.toml")])


def _declared() -> dict[str, dict[str, set[str]]]:
    out = {}
    for p in PLUGIN_DIRS:
        data = tomllib.loads(p.read_text())
        provides = data.get("tool", {}).get("coevolve", {}).get("provides", {})
        out[data["project"]["name"]] = {k: set(v) for k, v in provides.items()}
    return out


def _registered() -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {}
    for kind, table in get_registry().components.items():
        for name, info in table.items():
            if info.distribution and info.distribution != "coevolve-sdk":
                out.setdefault(info.distribution, {}).setdefault(kind, set()).add(name)
    return out


def test_each_plugin_declares_exactly_what_it_registers() -> None:
    declared, registered = _declared(), _registered()
    assert len(declared) >= 8, f"found only {sorted(declared)}: the plugin folders moved, fix PLUGIN_DIRS"
    for dist, kinds in registered.items():
        assert declared.get(dist) == kinds, (f"{dist} registers {kinds} but its pyproject.toml "
                                             f"[tool.coevolve.provides] says {declared.get(dist)}")


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Non-docstring string constants of a module (docstrings may explain the paper's detectors)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_module_of_the_core_names_a_plugin_component() -> None:
    names = {name for kinds in _declared().values() for ns in kinds.values() for name in ns}
    assert {"rare", "grpo", "warehouse"} <= names
    hits = [f"{p.relative_to(REPO)}:{line}: {value!r}" for p in sorted((REPO / "coevolve_sdk").rglob("*.py"))
            for line, value in _string_constants(p) if value in names]
    assert not hits, "the core names plugin components (ask the registry or the component instead):\n" + "\n".join(hits)


def test_a_missing_plugin_is_named_from_its_own_pyproject() -> None:
    code = ("from coevolve_sdk import get_registry\n"
            "try:\n    get_registry().get('teacher', 'litellm')\nexcept Exception as e:\n    print(e)\n")
    env = {**os.environ, "COEVOLVE_DISABLE_PLUGINS": "litellm"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, check=True).stdout
    assert "No teacher named 'litellm'" in out and "pip install ./plugins/coevolve-litellm" in out, out
