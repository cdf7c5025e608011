"""The core's rooms depend on each other in one direction only.

``coevolve_sdk`` is grouped into rooms (subpackages, and a few modules at the bottom); a room may
import from the rooms on lower floors, never from a higher one or from the front door
(``coevolve_sdk/__init__.py``, which is for plugins and users). Why: a room you can read and
test with only what lies below it; an import that points up is how cycles (and a loop that
imports 26 modules) start. Imports under ``if TYPE_CHECKING:`` are for type hints only and do
not count; imports inside functions do (they run).

``docs/architecture.md`` draws the same floors; ``test_architecture_doc_matches_the_floors``
keeps the page and this table together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "coevolve_sdk"

#: floor -> rooms, bottom first. A room is a subpackage or a top-level module of coevolve_sdk.
FLOORS: list[tuple[str, ...]] = [
    ("errors", "ids", "kill_points", "lazy"),
    ("records",),
    ("components",),
    ("config",),
    ("env",),
    ("storage",),
    ("training",),
    ("evolution",),
    ("authoring", "run"),
    ("experiment",),
    ("cli",),
    ("__main__",),
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    return ".".join(["coevolve_sdk", *path.relative_to(CORE).with_suffix("").parts]).removesuffix(".__init__")


def _runtime_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module imported, names) of every import that runs, TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text())
    hints = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
             for n in ast.walk(node)}
    out = []
    for n in ast.walk(tree):
        if id(n) in hints:
            continue
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0 and n.module.split(".")[0] == "coevolve_sdk":
            out.append((n.lineno, n.module, [a.name for a in n.names]))
        elif isinstance(n, ast.Import):
            out += [(n.lineno, a.name, []) for a in n.names if a.name.split(".")[0] == "coevolve_sdk"]
    return out


def _core_files() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if p != CORE / "__init__.py")


def test_every_room_has_a_floor() -> None:
    rooms = {_room(_module_name(p)) for p in _core_files()}
    assert rooms == set(FLOOR), f"rooms without a floor: {rooms - set(FLOOR)}; floors without a room: {set(FLOOR) - rooms}"


def test_imports_point_down_or_sideways_within_a_room() -> None:
    bad = []
    for path in _core_files():
        me = _room(_module_name(path))
        for line, module, names in _runtime_imports(path):
            if module == "coevolve_sdk":
                if names != ["__version__"]:
                    bad.append(f"{path.relative_to(REPO)}:{line}: imports {names} from the front door; import the defining module")
                continue
            other = _room(module)
            if other != me and FLOOR[other] >= FLOOR[me]:
                bad.append(f"{path.relative_to(REPO)}:{line}: {me} (floor {FLOOR[me]}) imports {module} (floor {FLOOR[other]})")
    assert not bad, "imports that point up or sideways between rooms:\n" + "\n".join(bad)


def test_architecture_doc_matches_the_floors() -> None:
    """docs/architecture.md lists the floors top first, one table row each: `| n | `room`, ... | ... |`."""
    text = (REPO / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", text, re.MULTILINE)
    documented = {int(n): tuple(sorted(re.findall(r"`([\w]+)`", rooms))) for n, rooms in rows}
    assert documented == {i: tuple(sorted(rooms)) for i, rooms in enumerate(FLOORS)}, documented
