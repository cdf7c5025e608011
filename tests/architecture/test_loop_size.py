"""The loop stays the paper's algorithm and nothing else (issue 14): components are built,
scheduled, evaluated and checkpointed in their own modules, and loop.py stays about 300 lines."""

from __future__ import annotations

import ast

from tests.conftest import REPO

LOOP = REPO / "coevolve_sdk" / "run" / "loop.py"


def test_loop_py_stays_about_300_lines() -> None:
    n = len(LOOP.read_text().splitlines())
    assert n <= 310, (f"coevolve_sdk/run/loop.py has {n} lines: move what is not the paper's loop (scheduling, evaluation, "
                      "run-folder handling, metrics) into the module that owns it")


def test_the_loop_imports_no_plugin() -> None:
    tree = ast.parse(LOOP.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in names if m.startswith("coevolve_") and not m.startswith("coevolve_sdk")}
