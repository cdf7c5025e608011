"""docs/plugins/hooks.md documents every hook with the signature it has in the code."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pluggy

from coevolve_sdk.components import hooks

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins" / "hooks.md"


def hookspecs() -> dict[str, str]:
    out = {}
    for name, fn in vars(hooks).items():
        if callable(fn) and hasattr(fn, hooks.PROJECT + "_spec"):
            sig = inspect.signature(fn)
            params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
            out[name] = f"{name}({params}) -> {sig.return_annotation}"
    return out


def documented() -> dict[str, str]:
    found = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"^### ((\w+)\(.*\) -> .+)$", line.strip())
        if m:
            found[m.group(2)] = m.group(1)
    return found


def test_every_hook_is_documented_with_its_signature() -> None:
    code, doc = hookspecs(), documented()
    assert code, "no hookspecs found"
    missing = sorted(set(code) - set(doc))
    assert not missing, f"hooks missing from {DOC.name}: {missing}"
    unknown = sorted(set(doc) - set(code))
    assert not unknown, f"{DOC.name} documents hooks that do not exist: {unknown}"
    for name in code:
        assert doc[name] == code[name], f"{name}: documented as '{doc[name]}', code says '{code[name]}'"


def test_hooks_module_is_what_the_manager_uses() -> None:
    pm = pluggy.PluginManager(hooks.PROJECT)
    pm.add_hookspecs(hooks)
    assert set(hookspecs()) == {h for h in dir(pm.hook) if not h.startswith("_")}
