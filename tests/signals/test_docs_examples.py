"""Every code block of docs/signals.md is executed or checked here, or is marked as not runnable.

Markers are HTML comments on the line before a fence (invisible on the rendered page):
``<!-- not run: why -->`` for blocks a test cannot run (shell commands that install, a listing),
``<!-- file: path -->`` for files of the plugin tutorial, which are written to a temporary folder
and then used by the following Python blocks. Unmarked ``python`` blocks run in order in one
namespace, from that folder; unmarked ``yaml`` blocks must be valid detector configs.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.config import ComponentConfig
from coevolve_sdk.components.registry import Registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "signals.md"
FENCE = re.compile(
    r"(?:<!-- (?P<marker>not run|file): (?P<arg>[^>]+?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```",
    re.DOTALL,
)


def blocks() -> list[dict[str, str | None]]:
    return [m.groupdict() for m in FENCE.finditer(DOC.read_text(encoding="utf-8"))]


def test_every_block_is_run_checked_or_marked():
    found = blocks()
    assert len(found) >= 14
    for b in found:
        if b["marker"] is None:
            assert b["lang"] in {"python", "yaml"}, f"a {b['lang']!r} block needs a '<!-- not run: why -->' marker:\n{b['body']}"
        elif b["marker"] == "file":
            assert b["lang"] in {"python", "toml"}
    # no stray fences the regex could not pair up
    assert DOC.read_text(encoding="utf-8").count("```") == 2 * len(found)


def test_yaml_blocks_are_valid_detector_configs():
    reg = Registry()
    checked = 0
    for b in blocks():
        if b["lang"] != "yaml" or b["marker"]:
            continue
        for item in yaml.safe_load(b["body"])["detectors"]:
            comp = ComponentConfig.model_validate(item)
            reg.get("detector", comp.name).Options.model_validate(comp.options)
            checked += 1
    assert checked == 6  # the three detectors, and the small-run settings of the rare one


def test_tutorial_pyproject_declares_the_entry_point():
    files = {b["arg"]: b["body"] for b in blocks() if b["marker"] == "file"}
    project = tomllib.loads(files["coevolve-truncation/pyproject.toml"])["project"]
    module = project["entry-points"]["coevolve"]["truncation"]
    assert "coevolve-sdk" in project["dependencies"]
    assert f"coevolve-truncation/{module.replace('.', '/')}.py" in files


def test_python_blocks_run_in_order(tmp_path, monkeypatch):
    for b in blocks():
        if b["marker"] == "file":
            path = tmp_path / str(b["arg"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(b["body"]), encoding="utf-8")
    (tmp_path / "coevolve-truncation" / "truncation_signal" / "__init__.py").write_text("")  # "(empty)" in the listing
    monkeypatch.chdir(tmp_path)
    saved_path = list(sys.path)
    namespace: dict = {"__name__": "docs_signals"}
    ran = 0
    try:
        for b in blocks():
            if b["lang"] != "python" or b["marker"]:
                continue
            code = compile(str(b["body"]), f"{DOC.name}:python-block-{ran}", "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)  # noqa: S102 - our own documentation, not untrusted text
            ran += 1
    finally:
        sys.path[:] = saved_path
        for name in [m for m in sys.modules if m == "truncation_signal" or m.startswith("truncation_signal.")]:
            del sys.modules[name]
    assert ran >= 8


def test_printed_reasons_match_the_comments_below_them():
    """The '# ...' lines after print(signal.reason) show the real sentence, wrapped."""
    namespace: dict = {"__name__": "docs_signals"}
    checked = 0
    for b in blocks():
        if b["lang"] != "python" or b["marker"]:
            continue
        body = str(b["body"])
        if "truncation" in body:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(body, DOC.name, "exec"), namespace)  # noqa: S102
        m = re.search(r"print\((\w+(?:\[\d\])?)\.reason\)\n((?:# .*\n)+)", body)
        if m:
            shown = " ".join(line[2:] for line in m.group(2).splitlines())
            assert out.getvalue().strip() == shown
            checked += 1
    assert checked == 3


@pytest.mark.parametrize("anchor", ["## Forgetting", "## Boundary", "## Rare", "## Defaults and why",
                                    "## State saved in checkpoints", "## Write your own detector plugin"])
def test_page_has_its_sections(anchor):
    assert anchor in DOC.read_text(encoding="utf-8")
