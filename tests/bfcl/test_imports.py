"""The modules of coevolve_bfcl import each other without a circle.

Every import counts, at module level, inside functions and under TYPE_CHECKING alike: a lazy
import only hides a circle from the interpreter, not from a reader following the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import coevolve_bfcl

PKG = Path(coevolve_bfcl.__file__).resolve().parent


def local_imports(path: Path) -> set[str]:
    """Sibling modules ``path`` imports (``from .x import``, ``from . import x``, absolute)."""
    out: set[str] = set()
    siblings = {p.stem for p in PKG.glob("*.py")}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                if mod:
                    out.add(mod.split(".")[0])
                else:
                    out.update(a.name for a in node.names if a.name in siblings)
            elif mod.startswith("coevolve_bfcl."):
                out.add(mod.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("coevolve_bfcl."))
    return out - {path.stem, "__init__"}


def test_no_import_circle() -> None:
    graph = {p.stem: local_imports(p) for p in PKG.glob("*.py") if p.stem != "__init__"}
    assert graph["env"] >= {"sampling", "describe"}, graph["env"]  # the edges that used to close the circle

    def cycle_from(start: str) -> list[str] | None:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return path + [nxt]
                if nxt not in path:
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = [c for c in (cycle_from(m) for m in graph) if c]
    assert not cycles, f"import circles in coevolve_bfcl: {cycles}"
