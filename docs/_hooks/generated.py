"""Generate the configuration and CLI reference pages from the code itself, so they cannot
drift from it.

The generated Markdown sits in the pages between ``<!-- generated:NAME:start -->`` and
``<!-- generated:NAME:end -->`` markers and is committed, so the pages read the same in the
repository as on the site. As an mkdocs hook this module refreshes that text at every build;
run it as a script after changing an option or a command:

    python docs/_hooks/generated.py           # rewrite docs/reference/{configuration,cli,api}.md
    python docs/_hooks/generated.py --check   # exit 1 when a page is out of date (tests/docs runs it)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGES = {"config": REPO / "docs" / "reference" / "configuration.md", "cli": REPO / "docs" / "reference" / "cli.md",
         "api": REPO / "docs" / "reference" / "api.md"}


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

    from coevolve_sdk.components.base import KINDS
    from coevolve_sdk import RunConfig
    from coevolve_sdk import Registry

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

    from coevolve_sdk.cli.main import app

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
            names = f"`{(p.metavar or p.name.upper())}`" if is_arg(p) else ", ".join(
                f"`{o}`" for o in [*p.opts, *getattr(p, "secondary_opts", [])])
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


#: The Python API page: (section, modules). For the core, the names each module contributes to the
#: front door (``coevolve_sdk._EXPORTS``: everything a plugin may import); for a plugin, its
#: module's ``__all__``. Signatures and docstrings are read from the code, as plain Markdown.
API_SECTIONS: list[tuple[str, list[str]]] = [
    ("Writing a plugin", ["coevolve_sdk.components.hooks", "coevolve_sdk.components.context", "coevolve_sdk.components.registry",
                          "coevolve_sdk.lazy"]),
    ("Records", ["coevolve_sdk.records"]),
    ("Environments", ["coevolve_sdk.env.base", "coevolve_sdk.env.toolenv", "coevolve_sdk.env.tools", "coevolve_sdk.env.rubric", "coevolve_sdk.env.actions",
                      "coevolve_sdk.authoring.check"]),
    ("Policies, algorithms and rollouts", ["coevolve_sdk.training.policy", "coevolve_sdk.training.algorithm", "coevolve_sdk.training.processes",
                                           "coevolve_sdk.training.rollout"]),
    ("Signals, teachers and the task pool", ["coevolve_sdk.evolution.signals", "coevolve_sdk.evolution.teacher",
                                             "coevolve_sdk.evolution.validation", "coevolve_sdk.evolution.pool"]),
    ("Errors", ["coevolve_sdk.errors", "coevolve_sdk.components.blame", "coevolve_sdk.env.contract"]),
    ("Running from Python", ["coevolve_sdk.config", "coevolve_sdk.run.loop", "coevolve_sdk.run.evaluation", "coevolve_sdk.storage.store",
                             "coevolve_sdk.storage.machine", "coevolve_sdk.experiment.stats"]),
    ("The LiteLLM teacher (coevolve-litellm)", ["coevolve_litellm.teacher", "coevolve_litellm.client", "coevolve_litellm.options",
                                                "coevolve_litellm.prompts", "coevolve_litellm.parsing"]),
]


def _doc(obj: Any) -> str:
    import inspect

    # the object's own docstring: inspect.getdoc would inherit a base class's (pydantic's
    # BaseModel docstring, with links that point into pydantic's site)
    own = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    doc = inspect.cleandoc(own) if isinstance(own, str) else ""
    # RST literal blocks ("text::" + indented lines) read as Markdown code blocks once the
    # indented block is fenced; everything else (``code``, *emphasis*, lists) reads as it is.
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line[:-1] if line.rstrip().endswith("::") and not line.strip() == "::" else line)
        if line.rstrip().endswith("::"):
            j = i + 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                import textwrap

                out.append("")
                out.append("```text")
                out.extend(textwrap.dedent("\n".join(b for b in block)).strip("\n").splitlines())
                out.append("```")
                out.append("")
                i = j
                continue
        i += 1
    return "\n".join(out).strip()


def _signature(obj: Any) -> str:
    import inspect

    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return re.sub(r" at 0x[0-9a-f]+", "", sig)


def _api_class(name: str, cls: Any, out: list[str]) -> None:
    import inspect

    from pydantic import BaseModel

    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    out.append(f"### `{name}`\n")
    out.append(f"```python\nclass {name}({', '.join(bases)})\n```\n")
    out.append(_doc(cls) + "\n")
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        own = [(f, info) for f, info in cls.model_fields.items() if f in getattr(cls, "__annotations__", {})]
        if own:
            out.append("| field | type | default | meaning |\n|---|---|---|---|")
            for f, info in own:
                typ = str(info.annotation).replace("typing.", "") if typing_args(info.annotation) else (
                    getattr(info.annotation, "__name__", None) or str(info.annotation).replace("typing.", ""))
                typ = re.sub(r"<class '([\w.]+)'>", r"\1", typ).replace("|", "\\|")
                if info.is_required():
                    default = "required"
                elif info.default_factory is not None and info.get_default(call_default_factory=True) != info.get_default(
                        call_default_factory=True):  # made fresh for each record (an id, say): no fixed value
                    default = "generated"
                elif info.default_factory is not None:
                    default = repr(info.get_default(call_default_factory=True))
                else:
                    default = repr(info.get_default())
                default = re.sub(r" at 0x[0-9a-f]+", "", default)
                if len(default) > 50:
                    default = default[:47] + "..."
                desc = " ".join((info.description or "").split()).replace("|", "\\|")
                out.append(f"| `{f}` | `{typ}` | `{default}` | {desc} |")
            out.append("")
    for attr, value in vars(cls).items():
        if attr.startswith("_") and attr != "__init__":
            continue
        fn = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if isinstance(value, property):
            doc = _doc(value)
            out.append(f"- **`{attr}`** (property)" + (f": {doc.splitlines()[0]}" if doc else ""))
            continue
        if not inspect.isfunction(fn):
            continue
        if attr == "__init__" and not fn.__doc__:
            continue
        sig = _signature(fn)
        sig = re.sub(r"^\(self,? ?|^\(cls,? ?", "(", sig)
        doc = _doc(fn)
        out.append(f"- **`{attr}{sig}`**" + ("" if not doc else "\n\n" + "\n".join("    " + ln if ln else "" for ln in doc.splitlines())))
    out.append("")


def typing_args(ann: Any) -> tuple[Any, ...]:
    import typing

    return typing.get_args(ann)


def _api_reference() -> str:
    import importlib
    import inspect

    out: list[str] = []
    for section, modules in API_SECTIONS:
        out.append(f"\n## {section}\n")
        for modname in modules:
            mod = importlib.import_module(modname)
            where = f"`{modname}`, imported from `coevolve_sdk`" if modname.startswith("coevolve_sdk") else f"Module `{modname}`"
            out.append(f"\n### {where}\n")
            out.append(_doc(mod) + "\n")
            if modname.startswith("coevolve_sdk"):  # the core: only what the front door exports
                import coevolve_sdk

                names = [n for n, m in coevolve_sdk._EXPORTS.items() if m == modname]
            else:
                names = list(getattr(mod, "__all__", []))
            for name in names:
                obj = getattr(mod, name, None)
                if obj is None:
                    continue
                if inspect.isclass(obj):
                    _api_class(name, obj, out)
                elif callable(obj):
                    out.append(f"### `{name}`\n")
                    out.append(f"```python\ndef {name}{_signature(obj)}\n```\n")
                    out.append(_doc(obj) + "\n")
                else:
                    out.append(f"### `{name}`\n")
                    shown = repr(obj)
                    out.append(f"A constant: `{shown[:100] + ('...' if len(shown) > 100 else '')}`.\n")
    return "\n".join(out)


GENERATORS = {"config": _config_reference, "cli": _cli_reference, "api": _api_reference}


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
