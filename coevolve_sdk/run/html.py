"""The HTML shell of the pages CoEvolve writes (a run's ``report.html``, an experiment's
``experiment.html``): one look, one escaping rule, no template engine and no script, so a page
opens from the run folder in any browser and shows nothing a run folder could inject."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

__all__ = ["page", "figures", "PlotFolder"]

_CSS = """body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
figure { display: inline-block; margin: 0.5em; } img { max-width: %dpx; border: 1px solid #ddd; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; } td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: left; }
th { background: #f3f3f3; }
"""


def page(title: str, body: str, *, css: str = "", image_width: int = 640) -> str:
    """A whole page: ``title`` is escaped here; ``body`` is HTML the caller escaped itself."""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>\n'
            f"<style>\n{_CSS % image_width}{css}</style></head><body>\n{body}\n</body></html>")


def figures(plots: dict[str, str]) -> str:
    """One ``<figure>`` per plot: caption -> image path relative to the page."""
    return "".join(f'<figure><img src="{escape(src)}" alt="{escape(title)}"><figcaption>{escape(title)}</figcaption></figure>'
                   for title, src in plots.items())


class PlotFolder:
    """Where a page's charts are saved: each :class:`~coevolve_sdk.run.svg.Figure` becomes an SVG
    file in ``folder``, and ``made`` maps its caption to its path as the page links it
    (``link_prefix`` + file name), ready for :func:`figures`."""

    def __init__(self, folder: Path, link_prefix: str) -> None:
        self.folder = folder
        self.link_prefix = link_prefix
        self.made: dict[str, str] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def save(self, fig: Any, file: str, title: str) -> None:
        path = self.folder / file
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(fig.svg())
        tmp.replace(path)
        self.made[title] = f"{self.link_prefix}{file}"
