"""The configuration and CLI reference pages committed in docs/reference are in step with the
code (they are generated from it; `python docs/_hooks/generated.py` rewrites them)."""

from __future__ import annotations

import re

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_generated_reference_pages_are_up_to_date() -> None:
    r = subprocess.run([sys.executable, str(REPO / "docs" / "_hooks" / "generated.py"), "--check"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_pages_read_in_the_repository() -> None:
    config = (REPO / "docs" / "reference" / "configuration.md").read_text()
    for key in ("`training.steps`", "`evolution.mode`", "## Component options", "### environment `kvstore` (coevolve-kvstore)",
                "`environment.options.train_tasks`", "`algorithm.options.warm_start.steps`", "`detectors[i].options."):
        assert key in config, key
    cli = (REPO / "docs" / "reference" / "cli.md").read_text()
    for key in ("### `coevolve pool show`", "### `coevolve check env`", "### `coevolve new env`", "### `coevolve config schema`"):
        assert key in cli, key


def test_the_api_page_is_markdown_with_signatures_and_docstrings() -> None:
    api = (REPO / "docs" / "reference" / "api.md").read_text()
    assert ":::" not in api  # readable without mkdocstrings (on GitHub, in an editor)
    for key in ("### `coevolve_sdk.env.toolenv`, imported from `coevolve_sdk`", "### `ToolEnv`", "### `check_env`",
                "```python\ndef check_env(env:", "### `GraderError`", "### `Task`", "| `query` | `str` | `required` |",
                "- **`build_task(query:", "### Module `coevolve_litellm.teacher`"):
        assert key in api, key
    # the page is the front door: every public name has its entry, and nothing private does
    import coevolve_sdk

    documented = set(re.findall(r"^### `(\w+)`$", api, re.MULTILINE))
    assert set(coevolve_sdk._EXPORTS) <= documented, set(coevolve_sdk._EXPORTS) - documented
    assert "### `coevolve_sdk.run.trajectories`" not in api
    assert " at 0x" not in api  # no object addresses: the page is the same on every machine


def test_a_stale_page_is_detected(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "docs" / "_hooks"))
    try:
        import generated
    finally:
        sys.path.remove(str(REPO / "docs" / "_hooks"))
    page = "intro\n<!-- generated:cli:start -->\nold text\n<!-- generated:cli:end -->\noutro\n"
    fresh = generated.fill(page)
    assert "old text" not in fresh and "### `coevolve run`" in fresh and fresh.endswith("<!-- generated:cli:end -->\noutro\n")
    assert generated.fill(fresh) == fresh
