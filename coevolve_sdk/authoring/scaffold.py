"""``coevolve new env NAME``: a pip-installable environment plugin that works as generated.

The package it writes has everything a plugin needs and nothing it does not: the entry point,
an environment on ToolEnv with two tools and generated tasks, a test that runs the contract
checker, and a tiny run config. Generated code is a starting point people edit, so it is kept
short and plain; the templates are files under ``coevolve_sdk/authoring/templates/env`` (``$name``
placeholders, ``string.Template``) so they read as the code they become.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from string import Template

from coevolve_sdk.errors import CoEvolveError

__all__ = ["new_env", "ScaffoldError", "plugin_names"]

_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")

#: template file -> path in the generated package (``{pkg}``, ``{name}`` filled in)
_FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "__init__.py.tmpl": "{pkg}/__init__.py",
    "plugin.py.tmpl": "{pkg}/plugin.py",
    "env.py.tmpl": "{pkg}/env.py",
    "test_env.py.tmpl": "tests/test_env.py",
    "run.yaml.tmpl": "{name}-tiny.yaml",
}


class ScaffoldError(CoEvolveError):
    pass


def plugin_names(name: str) -> dict[str, str]:
    """The names derived from an environment name: ``dist`` (coevolve-NAME), ``pkg``
    (coevolve_NAME) and ``cls`` (NameEnv). Raises ScaffoldError on a name that cannot be all three."""
    if not _NAME.fullmatch(name or ""):
        raise ScaffoldError(
            f"'{name}' cannot name an environment plugin: use lowercase letters and digits, words joined by '-', "
            "starting with a letter (e.g. library, pet-shop)."
        )
    cls = "".join(part.capitalize() for part in name.split("-")) + "Env"
    return {"name": name, "dist": f"coevolve-{name}", "pkg": "coevolve_" + name.replace("-", "_"), "cls": cls}


def new_env(name: str, dest: Path | str = ".", force: bool = False) -> Path:
    """Write the plugin package ``coevolve-NAME/`` under ``dest`` and return its folder.

    Refuses to write into an existing non-empty folder unless ``force``."""
    from coevolve_sdk import __version__

    names = plugin_names(name)
    root = Path(dest) / names["dist"]
    if root.exists() and any(root.iterdir()) and not force:
        raise ScaffoldError(f"{root} already exists and is not empty; choose another name or folder, or pass --force to overwrite it.")
    values = {**names, "sdk_version": __version__}
    templates = resources.files("coevolve_sdk.authoring").joinpath("templates/env")
    for tmpl, target in _FILES.items():
        text = Template(templates.joinpath(tmpl).read_text(encoding="utf-8")).substitute(values)
        path = root / target.format(**names)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
