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
    import click
    import typer

    from coevolve_sdk.cli import app

    root = typer.main.get_command(app)
    out: list[str] = []

    def walk(cmd: click.Command, path: str) -> None:
        out.append(f"\n### `{path}`\n")
        out.append((cmd.help or "").strip().split("\n\n")[0] + "\n")
        ctx = click.Context(cmd, info_name=path)
        pieces = [p.make_metavar(ctx) if isinstance(p, click.Argument) else "" for p in cmd.params]
        usage = " ".join(x for x in [path, "[OPTIONS]" if any(isinstance(p, click.Option) for p in cmd.params) else "", *pieces] if x)
        if isinstance(cmd, click.Group):
            usage += " COMMAND"
        out.append(f"```text\n{usage}\n```\n")
        rows = []
        for p in cmd.params:
            if isinstance(p, click.Option) and p.name == "help":
                continue
            names = ", ".join(f"`{o}`" for o in p.opts) if isinstance(p, click.Option) else f"`{p.human_readable_name}`"
            helptext = (getattr(p, "help", None) or "").replace("|", "\\|")
            default = "" if p.default in (None, (), []) or p.required else f" (default: `{p.default}`)"
            rows.append(f"| {names} | {helptext}{default} |")
        if rows:
            out.append("| argument / option | meaning |\n|---|---|\n" + "\n".join(rows) + "\n")
        if isinstance(cmd, click.Group):
            for name in sorted(cmd.commands):
                walk(cmd.commands[name], f"{path} {name}")

    walk(root, "coevolve")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- generated:config -->" in markdown:
        markdown = markdown.replace("<!-- generated:config -->", _config_reference())
    if "<!-- generated:cli -->" in markdown:
        markdown = markdown.replace("<!-- generated:cli -->", _cli_reference())
    return markdown
