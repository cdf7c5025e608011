"""The SVG charts of the run report and the experiment page (coevolve_sdk.run.svg): well-formed,
values where the axes say they are, nothing a run folder's text could inject, and no matplotlib."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from coevolve_sdk.run.svg import COLORS, Figure, nice_ticks
from tests.conftest import REPO

FIXTURE = REPO / "tests" / "data" / "run-fa4cf36"  # written by `coevolve run` at commit fa4cf36

NS = "{http://www.w3.org/2000/svg}"


def parse(fig: Figure) -> ElementTree.Element:
    return ElementTree.fromstring(fig.svg())


def frame(root: ElementTree.Element) -> tuple[float, float, float, float]:
    """The plot area: the clip rectangle of the (first) panel."""
    r = root.find(f".//{NS}clipPath/{NS}rect")
    assert r is not None
    return float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height"))


def test_a_bar_and_a_line_sit_where_their_values_say() -> None:
    fig = Figure(600, 300)
    ax = fig.axes("t", "x", "y", ylim=(0, 1), xlim=(0, 4))
    ax.bars([2], [0.5], width=1.0, color="#123456")
    ax.line([0, 4], [0, 1], color="#654321")
    root = parse(fig)
    x0, y0, w, h = frame(root)
    bar = next(r for r in root.iter(f"{NS}rect") if r.get("fill") == "#123456")
    # x from 1.5 to 2.5 of 0..4, height half of the plot, standing on its bottom edge
    assert float(bar.get("x")) == pytest.approx(x0 + w * 1.5 / 4, abs=0.1)
    assert float(bar.get("width")) == pytest.approx(w / 4, abs=0.1)
    assert float(bar.get("height")) == pytest.approx(h / 2, abs=0.1)
    assert float(bar.get("y")) + float(bar.get("height")) == pytest.approx(y0 + h, abs=0.1)
    line = next(p for p in root.iter(f"{NS}polyline") if p.get("stroke") == "#654321")
    (ax_, ay), (bx, by) = [tuple(map(float, pt.split(","))) for pt in line.get("points").split()]
    assert (ax_, ay) == pytest.approx((x0, y0 + h), abs=0.1) and (bx, by) == pytest.approx((x0 + w, y0), abs=0.1)


def test_stacked_bars_start_where_the_one_below_ends() -> None:
    fig = Figure()
    ax = fig.axes(ylim=(0, 4))
    ax.bars([1], [1.0], color="#000001")
    ax.bars([1], [2.0], bottom=[1.0], color="#000002")
    root = parse(fig)
    low = next(r for r in root.iter(f"{NS}rect") if r.get("fill") == "#000001")
    high = next(r for r in root.iter(f"{NS}rect") if r.get("fill") == "#000002")
    assert float(high.get("y")) + float(high.get("height")) == pytest.approx(float(low.get("y")), abs=0.25)
    assert float(high.get("height")) == pytest.approx(2 * float(low.get("height")), abs=0.25)


def test_text_from_a_run_folder_is_escaped() -> None:
    evil = '<script>alert(1)</script> & "quoted"'
    fig = Figure()
    ax = fig.axes(evil, evil, evil)
    ax.line([1, 2], [1, 2], label=evil)
    ax.xticks([1, 2], [evil, "b"])
    text = fig.svg()
    root = ElementTree.fromstring(text)  # still well-formed XML
    assert "<script" not in text and not list(root.iter(f"{NS}script"))
    assert sum(1 for t in root.iter(f"{NS}text") if t.text == evil) >= 4  # and shown as written


def test_missing_and_non_finite_values_are_left_out_not_drawn_at_zero() -> None:
    fig = Figure()
    ax = fig.axes(ylim=(0, 1))
    ax.line([1, 2, 3, 4], [0.5, None, math.nan, 0.5], color="#0a0a0a", marker=True)
    root = parse(fig)
    line = next(p for p in root.iter(f"{NS}polyline") if p.get("stroke") == "#0a0a0a")
    assert len(line.get("points").split()) == 2
    assert len([c for c in root.iter(f"{NS}circle") if c.get("fill") == "#0a0a0a"]) == 2


def test_an_empty_chart_and_a_single_point_still_draw() -> None:
    for build in (lambda ax: None, lambda ax: ax.line([3], [0.25]), lambda ax: ax.bars([], [])):
        fig = Figure()
        build(fig.axes("empty"))
        root = parse(fig)
        assert root.tag == f"{NS}svg"


def test_series_of_unequal_length_are_refused() -> None:
    ax = Figure().axes()
    with pytest.raises(ValueError, match="as many x as y"):
        ax.line([1, 2], [1])
    with pytest.raises(ValueError, match="as many x values"):
        ax.bars([1, 2], [1, 2], bottom=[0])


def test_colours_follow_the_cycle_and_a_second_axis_gets_its_own_scale() -> None:
    fig = Figure()
    ax = fig.axes(right_label="calls")
    ax.bars([1, 2], [1, 2])
    ax.line([1, 2], [100, 300], right=True)
    root = parse(fig)
    assert any(r.get("fill") == COLORS[0] for r in root.iter(f"{NS}rect"))
    labels = [t.text for t in root.iter(f"{NS}text")]
    assert "300" in labels and "calls" in labels  # the right axis reaches the line's values


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 1) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    t = nice_ticks(-0.02, 1.02)
    assert t[0] >= -0.02 and t[-1] <= 1.02 and 0.0 in t and 1.0 in t
    assert nice_ticks(3, 3)  # a flat range still gets ticks


def test_a_report_of_an_old_run_folder_is_drawn_without_matplotlib(tmp_path) -> None:  # noqa: ANN001
    """`coevolve report` on a run folder written by older code (commit fa4cf36) draws its plots
    as SVG, in milliseconds, because nothing heavy is imported for them."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    code = ("import sys\nfrom coevolve_sdk.run.report import write_report\n"
            f"write_report({str(run)!r})\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    html = (run / "report.html").read_text()
    for name in ("reward.svg", "eval.svg", "pool.svg"):
        assert f'src="report/{name}"' in html
        assert ElementTree.parse(run / "report" / name).getroot().tag == f"{NS}svg"
