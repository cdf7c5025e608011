"""Generate the configuration and CLI reference pages from the code itself, so they cannot
drift from it.

The generated Markdown sits in the pages between ``<!-- generated:NAME:start -->`` and
``<!-- generated:NAME:end -->`` markers and is committed, so the pages read the same in the
repository as on the site. As an mkdocs hook this module refreshes that text at every build;
run it as a script after changing an option or a command:

    python docs/_hooks/generated.py           # rewrite docs/reference/{configuration,cli}.md
    python docs/_hooks/generated.py --check   # exit 1 when a page is out of date (tests/docs runs it)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGES = {"config": REPO / "docs" / "reference" / "configuration.md", "cli": REPO / "docs" / "reference" / "cli.md"}


def _options_table(model: Any, prefix: str, lines: list[str], title: str | None = None) -> None:
    from pydantic import BaseModel

    def walk(model: type[BaseModel], prefix: str, title: str | None) -> None:
        rows, nested = [], []
        for name, field in model.model_fields.items():
            ann = field.annotation
            path = f"{prefix}{name}"
            if isinstance(ann, type) and issubclass(ann, BaseModel) and ann.__name__ != "Component":
                nested.append((ann, path + "."))
                continue
            typ = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
            default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
            if len(default) > 60:
                default = default[:57] + "..."
            desc = (field.description or "").replace("|", "\\|")
            rows.append(f"| `{path}` | `{typ}` | `{default}` | {desc} |")
        if rows:
            heading = title or f"### `{prefix.rstrip('.') or 'top level'}`"
            lines.append(f"\n{heading}\n")
            lines.append("| key | type | default | meaning |")
            lines.append("|---|---|---|---|")
            lines.extend(rows)
            title = None
        for sub, p in nested:
            walk(sub, p, None)

    walk(model, prefix, title)


def _repo_distributions() -> set[str] | None:
    """Names of the distributions whose pyproject.toml git tracks here (None without git):
    the component section documents this repository's components, not whatever else is installed."""
    import tomllib

    try:
        tracked = subprocess.run(["git", "ls-files", "pyproject.toml", "*/pyproject.toml"], cwd=REPO, capture_output=True,
                                 text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    return {tomllib.loads((REPO / p).read_text())["project"]["name"] for p in tracked if (REPO / p).exists()}


def _config_reference() -> str:
    from pydantic import BaseModel

    from coevolve_sdk.components import KINDS
    from coevolve_sdk.config import RunConfig
    from coevolve_sdk.registry import Registry

    lines: list[str] = []
    _options_table(RunConfig, "", lines)
    lines.append("\n## Component options\n")
    lines.append("The options of every component of this repository's distributions, as `coevolve config schema` "
                 "prints them (under `x-components`). A config sets them under the component's `options`.")
    ours = _repo_distributions()
    registry = Registry()
    for k in KINDS:
        for name, info in sorted(registry.components.get(k.name, {}).items()):
            if ours is not None and info.distribution not in ours:
                continue
            model = getattr(info.cls, "Options", None)
            path = k.config_path + ("[i]" if k.many else "")
            title = f"### {k.name} `{name}` ({info.distribution or 'built in'})"
            if not (isinstance(model, type) and issubclass(model, BaseModel)) or not model.model_fields:
                lines.append(f"\n{title}\n\nNo options.")
                continue
            _options_table(model, f"{path}.options.", lines, title)
    return "\n".join(lines)


def _cli_reference() -> str:
    import typer

    from coevolve_sdk.cli import app

    # typer ships its own copy of click: duck-type the command objects instead of isinstance
    root = typer.main.get_command(app)
    out: list[str] = []

    def is_arg(p: Any) -> bool:
        return getattr(p, "param_type_name", "") == "argument"

    def walk(cmd: Any, path: str) -> None:
        out.append(f"\n### `{path}`\n")
        out.append((cmd.help or "").strip() + "\n")
        args = [(p.metavar or p.name.upper()) for p in cmd.params if is_arg(p)]
        has_opts = any(not is_arg(p) and p.name != "help" for p in cmd.params)
        usage = " ".join([path, *(["[OPTIONS]"] if has_opts else []), *args, *(["COMMAND"] if hasattr(cmd, "commands") else [])])
        out.append(f"```text\n{usage}\n```\n")
        rows = []
        for p in cmd.params:
            if p.name == "help":
                continue
            names = f"`{(p.metavar or p.name.upper())}`" if is_arg(p) else ", ".join(f"`{o}`" for o in p.opts)
            helptext = (getattr(p, "help", None) or "").replace("|", "\\|").replace("\n", " ")
            default = p.default
            shown = "" if default in (None, (), [], False) or p.required or callable(default) else f" (default: `{default}`)"
            rows.append(f"| {names} | {helptext}{shown} |")
        if rows:
            out.append("| argument / option | meaning |\n|---|---|\n" + "\n".join(rows) + "\n")
        for name in sorted(getattr(cmd, "commands", {})):
            walk(cmd.commands[name], f"{path} {name}")

    walk(root, "coevolve")
    return "\n".join(out)


GENERATORS = {"config": _config_reference, "cli": _cli_reference}


def fill(markdown: str) -> str:
    """``markdown`` with every generated block (between its start and end markers) made fresh."""
    for name, gen in GENERATORS.items():
        start, end = f"<!-- generated:{name}:start -->", f"<!-- generated:{name}:end -->"
        if start in markdown:
            block = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
            text = gen()
            markdown = block.sub(lambda _m: f"{start}\n{text}\n{end}", markdown)
    return markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return fill(markdown)


def main(argv: list[str]) -> int:
    stale = []
    for name, page in PAGES.items():
        old = page.read_text()
        new = fill(old)
        if new != old:
            stale.append(page)
            if "--check" not in argv:
                page.write_text(new)
    if "--check" in argv and stale:
        print("out of date (run: python docs/_hooks/generated.py): " + ", ".join(str(p.relative_to(REPO)) for p in stale))
        return 1
    for p in stale:
        print(f"rewrote {p.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main(sys.argv[1:]))
