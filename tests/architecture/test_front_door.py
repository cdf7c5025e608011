"""``coevolve_sdk`` is the one front door: plugins, examples and the scaffold's templates import
only its top-level names, and every name it promises resolves.

Why: a plugin that imports ``coevolve_sdk.evolution.teacher`` ties itself to a room of the core
that may move; one that imports ``from coevolve_sdk import Teacher`` keeps working. The test reads
the source (``ast`` for Python, the import lines of the ``.tmpl`` templates) so that a new plugin
file that reaches inside fails here, with its file and line.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import coevolve_sdk

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = [REPO / "plugins", REPO / "examples", REPO / "coevolve_sdk" / "authoring" / "templates"]


def _inside_imports(path: Path) -> list[str]:
    """``file:line: statement`` for each import of a module below ``coevolve_sdk``."""
    text = path.read_text()
    rel = path.relative_to(REPO)
    if path.suffix == ".tmpl":  # not valid Python before rendering: read its import lines
        return [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
                if re.match(r"\s*(from|import)\s+coevolve_sdk\.", line)]
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("coevolve_sdk."):
            out.append(f"{rel}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            out += [f"{rel}:{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("coevolve_sdk.")]
    return out


def test_plugins_examples_and_templates_import_only_the_front_door() -> None:
    files = [p for root in OUTSIDE for p in sorted(root.rglob("*")) if p.suffix in (".py", ".tmpl")
             and ".egg-info" not in str(p) and "__pycache__" not in p.parts]
    assert len(files) > 50, "the scan found too few files: the layout changed, fix OUTSIDE"
    bad = [hit for p in files for hit in _inside_imports(p)]
    assert not bad, ("these files import a private module of coevolve_sdk; import the name from `coevolve_sdk` "
                     "(add it to coevolve_sdk._EXPORTS if it is truly public):\n" + "\n".join(bad))


def test_every_exported_name_resolves_and_is_listed() -> None:
    for name in coevolve_sdk.__all__:
        assert getattr(coevolve_sdk, name) is not None, name
    assert set(coevolve_sdk._EXPORTS) <= set(dir(coevolve_sdk))
    # each export is defined where the table says (not a re-export of a re-export)
    for name, module in coevolve_sdk._EXPORTS.items():
        value = getattr(coevolve_sdk, name)
        if hasattr(value, "__module__") and isinstance(value, type):
            assert value.__module__ == module, f"{name} lives in {value.__module__}, the table says {module}"


def test_an_unknown_name_is_an_attribute_error_that_names_it() -> None:
    try:
        coevolve_sdk.NoSuchThing  # noqa: B018
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:  # pragma: no cover
        raise AssertionError("coevolve_sdk.NoSuchThing resolved")


def test_the_front_door_stays_light() -> None:
    """A plugin's ``from coevolve_sdk import hookimpl, Task`` loads neither torch nor the loop."""
    code = ("import sys; from coevolve_sdk import hookimpl, Task, ToolEnv, tool, SignalDetector; "
            "print(','.join(m for m in ('torch', 'transformers', 'litellm', 'vllm', 'coevolve_sdk.run.loop') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing the front door loaded {out.stdout.strip()}"
