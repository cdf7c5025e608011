"""mkdocs hook: fill the configuration and CLI reference pages from the code itself, so they
cannot drift from it."""

from __future__ import annotations

from typing import Any


def _config_reference() -> str:
    from pydantic import BaseModel

    from coevolve_sdk.config import RunConfig

    lines: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
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
            lines.append(f"\n### `{prefix.rstrip('.') or 'top level'}`\n")
            lines.append("| key | type | default | meaning |")
            lines.append("|---|---|---|---|")
            lines.extend(rows)
        for sub, p in nested:
            walk(sub, p)

    walk(RunConfig, "")
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


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- generated:config -->" in markdown:
        markdown = markdown.replace("<!-- generated:config -->", _config_reference())
    if "<!-- generated:cli -->" in markdown:
        markdown = markdown.replace("<!-- generated:cli -->", _cli_reference())
    return markdown
