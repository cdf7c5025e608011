"""No plugin touches a private attribute (``._x``) of another package.

Plugins meet the core and each other only through declared API (for the trainer and the
rollout engine: ``coevolve_sdk.training.policy.TrainablePolicy`` and the update phases). A private name
is one that starts with an underscore and is not a dunder. The check reads every plugin's
source with ``ast`` and accepts an access ``obj._x`` only when

* ``obj`` is ``self`` or ``cls`` and ``_x`` is defined somewhere in the same plugin package
  (its own attribute, or one inherited from a class of the same package), or
* ``_x`` is defined in the same module (a module's helpers may use its classes' internals).

So GRPO writing the ``hf`` policy's ``_model`` (another module), or the vLLM policy reading
``_stop_ids`` inherited from coevolve-grpo, or anyone reading torch's ``Tensor._version``,
fails. ``getattr(obj, "_x")`` and ``from pkg import _x`` / ``from pkg._mod import y`` count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Accesses that cannot be avoided, each with the reason. Keys: (path from the repo, source text).
ALLOWED: dict[tuple[str, str], str] = {
    ("plugins/coevolve-appworld/coevolve_appworld/isolated/worker.py", "os._exit"):
        "os._exit is the standard library's documented way for a child to leave without running parent cleanup",
    ("plugins/coevolve-bfcl/coevolve_bfcl/env.py", "inst._load_scenario"):
        "BFCL's backends have no public loader; BFCL's own harness initialises them through _load_scenario",
    ("plugins/coevolve-grpo/coevolve_grpo/policies.py", "p._version"):
        "torch has no public counter of in-place changes to a tensor; autograd itself detects stale saved tensors "
        "with _version, and the hf policy uses it the same way to drop caches computed with older weights (read only)",
    ("plugins/coevolve-bfcl/coevolve_bfcl/sampling.py", "getattr(inst, '_current_dir', None)"):
        "BFCL's file system keeps the working directory only in _current_dir (read, never written)",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(tree: ast.AST) -> set[str]:
    """Names a module defines: functions, classes, assigned names, attributes assigned on
    ``self``/``cls``, arguments, imported aliases and ``__slots__`` entries. (An assignment to
    ``other._x`` defines nothing: it is the very access this check looks for.)"""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif (
            isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del))
            and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
        ):
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in n.targets):
            out.update(c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return out


def _packages() -> list[Path]:
    roots = sorted(REPO.glob("plugins/*/*/__init__.py")) + sorted(REPO.glob("examples/plugins/*/*/__init__.py"))
    return [r.parent for r in roots if ".egg-info" not in str(r) and "/build/" not in str(r)]


def check_module(tree: ast.AST, rel: str, package: str, in_package: set[str]) -> list[str]:
    """Violations in one module of plugin package ``package`` (whose defined names are ``in_package``)."""
    in_module = _defined(tree)
    found: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        text = ast.unparse(node)
        if (rel, text) not in ALLOWED:
            found.append(f"{rel}:{getattr(node, 'lineno', 0)}: {what}: {text}")

    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and _private(n.attr):
            on_self = isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
            if not (n.attr in in_module or (on_self and n.attr in in_package)):
                flag(n, f"private attribute {n.attr} of another package")
        elif (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(n.args) >= 2
            and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)
            and _private(n.args[1].value) and n.args[1].value not in in_module
        ):
            flag(n, f"{n.func.id} of private attribute {n.args[1].value}")
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module and n.module.split(".")[0] != package:
            bad = [p for p in n.module.split(".") if _private(p)] + [a.name for a in n.names if _private(a.name)]
            if bad:
                flag(n, f"import of private {bad} from another package")
    return found


def violations() -> list[str]:
    found: list[str] = []
    for pkg in _packages():
        trees = {f: ast.parse(f.read_text(encoding="utf-8"), str(f)) for f in sorted(pkg.rglob("*.py"))}
        in_package = set().union(*(_defined(t) for t in trees.values())) | {f.stem for f in trees}
        for f, tree in trees.items():
            found += check_module(tree, str(f.relative_to(REPO)), pkg.name, in_package)
    return found


def test_no_plugin_touches_a_private_attribute_of_another_package() -> None:
    assert _packages(), "no plugin packages found"
    bad = violations()
    assert not bad, "plugins reach into other packages' internals:\n" + "\n".join(bad)


def test_the_check_catches_what_the_seam_replaced() -> None:
    """The patterns this check exists for are flagged (so an empty result means something)."""
    src = (
        "from torch.optim.optimizer import _global_hooks\n"
        "class GRPO:\n"
        "    def __init__(self, policy, p):\n"
        "        policy._model = None\n"            # writing another module's private attribute
        "        self.v = p._version\n"             # torch's private version counter
        "        self._stop = self._stop_ids\n"     # inherited from a class of another package
        "        getattr(p, '_hidden')\n"
        "        self._stop.append(1)\n"            # its own attribute: fine
    )
    tree = ast.parse(src)
    found = check_module(tree, "x.py", "coevolve_x", _defined(tree))
    assert len(found) == 5, found
    for what in ("_global_hooks", "policy._model", "p._version", "self._stop_ids", "_hidden"):
        assert any(what in f for f in found), (what, found)
