"""Small charts drawn as SVG text: the plots of a run's report and of an experiment's page.

Why not matplotlib: every finished run writes its report, and importing matplotlib and rendering
six PNGs cost about 0.9 s of CPU, more than everything else a short run does at its end; a test
suite of a few hundred short runs, or an experiment of many, pays it each time. The charts here
are a few lines, bars, bands and points on linear axes, which SVG draws directly: a chart is a
string, costs milliseconds, needs nothing installed, and stays sharp at any zoom.

Every text that reaches a chart (arm names, metric keys, signal kinds: all of them can come from a
config or a plugin) is escaped, and a chart holds no script, so an ``<img>`` of it shows nothing a
run folder could inject.

Usage::

    fig = Figure(630, 315)
    ax = fig.axes(title="Reward per step", xlabel="training step")
    ax.line([1, 2, 3], [0.1, 0.4, 0.5], label="mean reward", marker=True)
    ax.bars([1, 2, 3], [2, 0, 1], label="signals")
    Path("reward.svg").write_text(fig.svg())
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Literal, Sequence

__all__ = ["Figure", "Axes", "COLORS", "nice_ticks"]

#: The colour cycle: series without a colour of their own take these in order.
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
_DASH = {"solid": None, "dashed": "6,4", "dotted": "2,3"}
_FONT = 'font-family="system-ui, sans-serif"'
_CHAR_W = 0.56  # a character's width, as a share of the font size (for the legend's box and the margins)

Number = float | int | None


def _ok(v: Number) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """About ``target`` round values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(0.0 if abs(v) < step * 1e-9 else round(v, 12))
        v += step
    return out


def _fmt(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() and abs(v) < 1e6 else f"{v:.3g}"


@dataclass
class _Series:
    kind: str
    xs: list[float]
    ys: list[float]
    color: str
    label: str | None = None
    dash: str = "solid"
    marker: bool = False
    width: float = 2.0
    extra: dict = field(default_factory=dict)


class Axes:
    """One panel: a title, two linear axes and the series drawn on them, in the order added.

    The value range is the data's (bars from their base, zero included) unless ``ylim``/``xlim``
    fix it; ``right_label`` gives a second y axis with its own scale for the series added with
    ``right=True``."""

    def __init__(self, title: str = "", xlabel: str = "", ylabel: str = "", *, ylim: tuple[float | None, float | None] = (None, None),
                 xlim: tuple[float | None, float | None] = (None, None), grid: bool = True, legend: Literal["upper left", "upper right", "none"] = "upper right",
                 right_label: str = "", integer_x: bool = False) -> None:
        self.title, self.xlabel, self.ylabel, self.right_label = title, xlabel, ylabel, right_label
        self.ylim, self.xlim, self.grid, self.legend, self.integer_x = ylim, xlim, grid, legend, integer_x
        self.series: list[_Series] = []
        self.right: list[_Series] = []
        self._xticks: tuple[list[float], list[str], bool] | None = None
        self._next = 0

    def _color(self, color: str | None) -> str:
        if color is not None:
            return color
        c = COLORS[self._next % len(COLORS)]
        self._next += 1
        return c

    @staticmethod
    def _pairs(xs: Sequence[Number], ys: Sequence[Number]) -> tuple[list[float], list[float]]:
        if len(xs) != len(ys):
            raise ValueError(f"a series needs as many x as y values, got {len(xs)} and {len(ys)}")
        kept = [(float(x), float(y)) for x, y in zip(xs, ys) if _ok(x) and _ok(y)]  # type: ignore[arg-type]
        return [x for x, _ in kept], [y for _, y in kept]

    def line(self, xs: Sequence[Number], ys: Sequence[Number], *, label: str | None = None, color: str | None = None,
             dash: Literal["solid", "dashed", "dotted"] = "solid", marker: bool = False, width: float = 2.0,
             step: bool = False, right: bool = False) -> None:
        """A polyline through the points (missing or non-finite values are left out); ``step``
        holds each value until the next x, as a count does."""
        px, py = self._pairs(xs, ys)
        s = _Series("line", px, py, self._color(color), label, dash, marker, width, {"step": step})
        (self.right if right else self.series).append(s)

    def band(self, xs: Sequence[Number], lo: Sequence[Number], hi: Sequence[Number], *, color: str, opacity: float = 0.15) -> None:
        """A shaded area between two curves (a mean's spread)."""
        keep = [(float(x), float(a), float(b)) for x, a, b in zip(xs, lo, hi) if _ok(x) and _ok(a) and _ok(b)]  # type: ignore[arg-type]
        self.series.append(_Series("band", [k[0] for k in keep] * 2, [k[1] for k in keep] + [k[2] for k in keep], color,
                                   extra={"n": len(keep), "opacity": opacity}))

    def bars(self, xs: Sequence[Number], heights: Sequence[Number], *, width: float = 0.8, bottom: Sequence[float] | None = None,
             label: str | None = None, color: str | None = None, values: bool = False) -> None:
        """Bars centred on ``xs``, ``width`` in x units, stacked on ``bottom`` if given;
        ``values`` writes each bar's height above it (so that a zero reads as a result)."""
        base = list(bottom) if bottom is not None else [0.0] * len(xs)
        if len(base) != len(xs) or len(xs) != len(heights):
            raise ValueError(f"bars need as many x values, heights and bottoms, got {len(xs)}, {len(heights)}, {len(base)}")
        keep = [(float(x), float(h), float(b)) for x, h, b in zip(xs, heights, base) if _ok(x) and _ok(h) and _ok(b)]  # type: ignore[arg-type]
        self.series.append(_Series("bars", [k[0] for k in keep], [k[1] for k in keep], self._color(color), label,
                                   extra={"bottom": [k[2] for k in keep], "width": width, "values": values}))

    def points(self, xs: Sequence[Number], ys: Sequence[Number], *, color: str | None = None, radius: float = 3.0,
               opacity: float = 0.5, label: str | None = None) -> None:
        px, py = self._pairs(xs, ys)
        self.series.append(_Series("points", px, py, self._color(color), label, extra={"r": radius, "opacity": opacity}))

    def interval(self, x: float, y: float, lo: float, hi: float, *, color: str = "#000000", text: str | None = None) -> None:
        """A point with an error bar from ``lo`` to ``hi`` (a mean and its confidence interval)."""
        if _ok(x) and _ok(y) and _ok(lo) and _ok(hi):
            self.series.append(_Series("interval", [x, x, x], [y, lo, hi], color, extra={"text": text}))

    def hline(self, y: float, *, color: str = "#808080", dash: Literal["solid", "dashed", "dotted"] = "dashed", label: str | None = None) -> None:
        """A level across the whole panel."""
        if _ok(y):
            self.series.append(_Series("hline", [], [y], color, label, dash, width=1.5))

    def vline(self, x: float, *, color: str = "#808080", dash: Literal["solid", "dashed", "dotted"] = "dotted") -> None:
        """A marker across the whole height (an evolution round)."""
        if _ok(x):
            self.series.append(_Series("vline", [x], [], color, None, dash, width=1.0))

    def xticks(self, positions: Sequence[float], labels: Sequence[str], *, rotate: bool = False) -> None:
        """Named categories on the x axis (arms, phases) instead of numbers."""
        if len(positions) != len(labels):
            raise ValueError(f"xticks need as many positions as labels, got {len(positions)} and {len(labels)}")
        self._xticks = ([float(p) for p in positions], [str(t) for t in labels], rotate)

    # --- drawing -------------------------------------------------------------------------------

    def _xrange(self) -> tuple[float, float]:
        xs: list[float] = []
        for s in self.series + self.right:
            if s.kind == "bars":
                xs += [x - s.extra["width"] / 2 for x in s.xs] + [x + s.extra["width"] / 2 for x in s.xs]
            elif s.kind not in ("hline", "vline"):  # a marker line does not stretch the axis
                xs += s.xs
        if self._xticks:
            xs += [p - 0.5 for p in self._xticks[0]] + [p + 0.5 for p in self._xticks[0]]
        lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
        if hi == lo:
            lo, hi = lo - 0.5, hi + 0.5
        elif not self._xticks and not any(s.kind == "bars" for s in self.series):
            pad = (hi - lo) * 0.02  # the first and last points off the frame
            lo, hi = lo - pad, hi + pad
        lo = self.xlim[0] if self.xlim[0] is not None else lo
        hi = self.xlim[1] if self.xlim[1] is not None else hi
        return lo, hi

    @staticmethod
    def _yrange(series: list[_Series], lim: tuple[float | None, float | None]) -> tuple[float, float]:
        ys: list[float] = []
        for s in series:
            if s.kind == "bars":
                ys += s.extra["bottom"] + [b + h for b, h in zip(s.extra["bottom"], s.ys)]
            elif s.kind != "vline":
                ys += s.ys
        lo, hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
        if any(s.kind == "bars" for s in series):
            lo = min(lo, 0.0)
        pad = (hi - lo) * 0.06 or 0.5
        if any(s.kind == "bars" and s.extra["values"] for s in series):
            hi += (hi - lo) * 0.08  # room for the numbers above the bars
        lo, hi = lo - (pad if lo != 0 else 0), hi + pad
        lo = lim[0] if lim[0] is not None else lo
        hi = lim[1] if lim[1] is not None else hi
        if hi <= lo:
            hi = lo + 1.0
        return lo, hi

    def draw(self, x0: float, y0: float, w: float, h: float) -> str:
        """The panel as SVG elements, inside the box (x0, y0, w, h) of the figure."""
        fs = 11
        rot = bool(self._xticks and self._xticks[2])
        tick_room = (max((len(t) for t in self._xticks[1]), default=0) * fs * _CHAR_W * 0.7 if rot
                     else 12 * max((t.count("\n") for t in self._xticks[1]), default=0) if self._xticks else 0)
        left = 52 + (14 if self.ylabel else 0)
        right = 14 + (50 if self.right else 0)
        top = 26 if self.title else 10
        bottom = 22 + (16 if self.xlabel else 0) + tick_room
        px0, py0, pw, ph = x0 + left, y0 + top, max(10.0, w - left - right), max(10.0, h - top - bottom)
        xlo, xhi = self._xrange()
        ylo, yhi = self._yrange(self.series, self.ylim)
        sx = lambda v: px0 + (v - xlo) / (xhi - xlo) * pw  # noqa: E731
        sy = lambda v: py0 + ph - (v - ylo) / (yhi - ylo) * ph  # noqa: E731
        out: list[str] = []
        e = lambda t: escape(str(t), quote=True)  # noqa: E731
        if self.title:
            out.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + 16:.1f}" text-anchor="middle" font-size="{fs + 2}" {_FONT}>{e(self.title)}</text>')
        # y ticks and grid
        for t in nice_ticks(ylo, yhi):
            if ylo - 1e-12 <= t <= yhi + 1e-12:
                y = sy(t)
                if self.grid:
                    out.append(f'<line x1="{px0:.1f}" y1="{y:.1f}" x2="{px0 + pw:.1f}" y2="{y:.1f}" stroke="#e4e4e4" stroke-width="1"/>')
                out.append(f'<text x="{px0 - 5:.1f}" y="{y + 4:.1f}" text-anchor="end" font-size="{fs - 1}" {_FONT}>{e(_fmt(t))}</text>')
        # x ticks
        if self._xticks:
            for p, lab in zip(self._xticks[0], self._xticks[1]):
                x = sx(p)
                if rot:
                    out.append(f'<text x="{x:.1f}" y="{py0 + ph + 14:.1f}" text-anchor="end" font-size="{fs - 1}" {_FONT} '
                               f'transform="rotate(-25 {x:.1f} {py0 + ph + 14:.1f})">{e(lab)}</text>')
                else:
                    for k, part in enumerate(lab.split("\n")):
                        out.append(f'<text x="{x:.1f}" y="{py0 + ph + 14 + 12 * k:.1f}" text-anchor="middle" font-size="{fs - 1}" {_FONT}>{e(part)}</text>')
        else:
            ticks = nice_ticks(xlo, xhi, 6)
            data_x = [x for s in self.series + self.right if s.kind not in ("hline", "band") for x in s.xs]
            if self.integer_x or (data_x and all(float(x).is_integer() for x in data_x)):  # steps, rounds: no 2.5
                ticks = [t for t in ticks if float(t).is_integer()]
            for t in ticks:
                if xlo - 1e-12 <= t <= xhi + 1e-12:
                    x = sx(t)
                    if self.grid:
                        out.append(f'<line x1="{x:.1f}" y1="{py0:.1f}" x2="{x:.1f}" y2="{py0 + ph:.1f}" stroke="#f0f0f0" stroke-width="1"/>')
                    out.append(f'<text x="{x:.1f}" y="{py0 + ph + 14:.1f}" text-anchor="middle" font-size="{fs - 1}" {_FONT}>{e(_fmt(t))}</text>')
        out.append(f'<rect x="{px0:.1f}" y="{py0:.1f}" width="{pw:.1f}" height="{ph:.1f}" fill="none" stroke="#666" stroke-width="1"/>')
        if self.xlabel:
            out.append(f'<text x="{px0 + pw / 2:.1f}" y="{y0 + h - 6:.1f}" text-anchor="middle" font-size="{fs}" {_FONT}>{e(self.xlabel)}</text>')
        if self.ylabel:
            cx, cy = x0 + 13, py0 + ph / 2
            out.append(f'<text x="{cx:.1f}" y="{cy:.1f}" text-anchor="middle" font-size="{fs}" {_FONT} transform="rotate(-90 {cx:.1f} {cy:.1f})">{e(self.ylabel)}</text>')
        clip = f"clip{id(self)}"
        out.append(f'<clipPath id="{clip}"><rect x="{px0:.1f}" y="{py0:.1f}" width="{pw:.1f}" height="{ph:.1f}"/></clipPath>')
        body: list[str] = []
        for s in self.series:
            body += self._series(s, sx, sy, px0, py0, pw, ph, fs)
        if self.right:
            rlo, rhi = self._yrange(self.right, (0.0, None))
            ry = lambda v: py0 + ph - (v - rlo) / (rhi - rlo) * ph  # noqa: E731
            for t in nice_ticks(rlo, rhi):
                if rlo - 1e-12 <= t <= rhi + 1e-12:
                    out.append(f'<text x="{px0 + pw + 5:.1f}" y="{ry(t) + 4:.1f}" font-size="{fs - 1}" {_FONT}>{e(_fmt(t))}</text>')
            if self.right_label:
                cx, cy = px0 + pw + 42, py0 + ph / 2
                out.append(f'<text x="{cx:.1f}" y="{cy:.1f}" text-anchor="middle" font-size="{fs}" {_FONT} transform="rotate(90 {cx:.1f} {cy:.1f})">{e(self.right_label)}</text>')
            for s in self.right:
                body += self._series(s, sx, ry, px0, py0, pw, ph, fs)
        out.append(f'<g clip-path="url(#{clip})">' + "".join(body) + "</g>")
        out += self._legend(px0, py0, pw, fs)
        return "".join(out)

    @staticmethod
    def _stroke(s: _Series) -> str:
        d = _DASH[s.dash]
        return f'stroke="{s.color}" stroke-width="{s.width}" fill="none"' + (f' stroke-dasharray="{d}"' if d else "")

    def _series(self, s: _Series, sx, sy, px0: float, py0: float, pw: float, ph: float, fs: int) -> list[str]:  # noqa: ANN001
        out: list[str] = []
        if s.kind == "line" and s.xs:
            pts = [(sx(x), sy(y)) for x, y in zip(s.xs, s.ys)]
            if s.extra.get("step"):
                stepped = [pts[0]]
                for (x, y), (_, py) in zip(pts[1:], pts[:-1]):
                    stepped += [(x, py), (x, y)]
                pts = stepped
            out.append('<polyline points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + f'" {self._stroke(s)}/>')
            if s.marker:
                out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{s.color}"/>' for x, y in zip(s.xs, s.ys)]
        elif s.kind == "band" and s.extra["n"]:
            n = s.extra["n"]
            xs, lo, hi = s.xs[:n], s.ys[:n], s.ys[n:]
            pts = [(sx(x), sy(y)) for x, y in zip(xs, hi)] + [(sx(x), sy(y)) for x, y in reversed(list(zip(xs, lo)))]
            out.append('<polygon points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                       + f'" fill="{s.color}" fill-opacity="{s.extra["opacity"]}" stroke="none"/>')
        elif s.kind == "bars":
            half = s.extra["width"] / 2
            for x, hgt, b in zip(s.xs, s.ys, s.extra["bottom"]):
                xa, xb = sx(x - half), sx(x + half)
                ya, yb = sy(b + hgt), sy(b)
                out.append(f'<rect x="{xa:.1f}" y="{min(ya, yb):.1f}" width="{max(0.5, xb - xa):.1f}" height="{abs(yb - ya):.1f}" fill="{s.color}"/>')
                if s.extra["values"]:
                    out.append(f'<text x="{(xa + xb) / 2:.1f}" y="{min(ya, yb) - 3:.1f}" text-anchor="middle" font-size="{fs - 2}" {_FONT}>{hgt:.3f}</text>')
        elif s.kind == "points":
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{s.extra["r"]}" fill="{s.color}" fill-opacity="{s.extra["opacity"]}"/>'
                    for x, y in zip(s.xs, s.ys)]
        elif s.kind == "interval":
            x, (y, lo, hi) = sx(s.xs[0]), s.ys
            out.append(f'<line x1="{x:.1f}" y1="{sy(lo):.1f}" x2="{x:.1f}" y2="{sy(hi):.1f}" stroke="{s.color}" stroke-width="1.5"/>')
            for v in (lo, hi):
                out.append(f'<line x1="{x - 6:.1f}" y1="{sy(v):.1f}" x2="{x + 6:.1f}" y2="{sy(v):.1f}" stroke="{s.color}" stroke-width="1.5"/>')
            out.append(f'<circle cx="{x:.1f}" cy="{sy(y):.1f}" r="4.5" fill="{s.color}"/>')
            if s.extra["text"]:
                out.append(f'<text x="{x + 9:.1f}" y="{sy(y) + 4:.1f}" font-size="{fs - 2}" {_FONT}>{escape(s.extra["text"])}</text>')
        elif s.kind == "hline":
            y = sy(s.ys[0])
            out.append(f'<line x1="{px0:.1f}" y1="{y:.1f}" x2="{px0 + pw:.1f}" y2="{y:.1f}" {self._stroke(s)}/>')
        elif s.kind == "vline":
            x = sx(s.xs[0])
            out.append(f'<line x1="{x:.1f}" y1="{py0:.1f}" x2="{x:.1f}" y2="{py0 + ph:.1f}" {self._stroke(s)}/>')
        return out

    def _legend(self, px0: float, py0: float, pw: float, fs: int) -> list[str]:
        entries = [s for s in self.series + self.right if s.label]
        if not entries or self.legend == "none":
            return []
        lfs = fs - 2
        box_w = 30 + max(len(s.label or "") for s in entries) * lfs * _CHAR_W
        box_h = 6 + 14 * len(entries)
        bx = px0 + 6 if self.legend == "upper left" else px0 + pw - box_w - 6
        by = py0 + 6
        out = [f'<rect x="{bx:.1f}" y="{by:.1f}" width="{box_w:.1f}" height="{box_h:.1f}" fill="#ffffff" fill-opacity="0.85" stroke="#cccccc"/>']
        for i, s in enumerate(entries):
            y = by + 12 + 14 * i
            if s.kind in ("bars", "points", "band"):
                out.append(f'<rect x="{bx + 6:.1f}" y="{y - 7:.1f}" width="14" height="8" fill="{s.color}"/>')
            else:
                d = _DASH[s.dash]
                out.append(f'<line x1="{bx + 5:.1f}" y1="{y - 3:.1f}" x2="{bx + 21:.1f}" y2="{y - 3:.1f}" stroke="{s.color}" stroke-width="2"'
                           + (f' stroke-dasharray="{d}"' if d else "") + "/>")
            out.append(f'<text x="{bx + 26:.1f}" y="{y:.1f}" font-size="{lfs}" {_FONT}>{escape(s.label or "", quote=True)}</text>')
        return out


class Figure:
    """A chart of one or more panels side by side, ``width`` × ``height`` pixels."""

    def __init__(self, width: int = 630, height: int = 315) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"a figure needs a positive size, got {width} x {height}")
        self.width, self.height = width, height
        self.panels: list[Axes] = []

    def axes(self, title: str = "", xlabel: str = "", ylabel: str = "", **kw: object) -> Axes:
        """A new panel, to the right of the ones before (they share the width evenly)."""
        ax = Axes(title, xlabel, ylabel, **kw)  # type: ignore[arg-type]
        self.panels.append(ax)
        return ax

    def svg(self) -> str:
        """The whole chart as an SVG document."""
        n = max(1, len(self.panels))
        w = self.width / n
        body = "".join(ax.draw(i * w, 0, w, self.height) for i, ax in enumerate(self.panels))
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}"><rect width="100%" height="100%" fill="#ffffff"/>{body}</svg>\n')
