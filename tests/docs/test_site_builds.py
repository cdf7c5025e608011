"""`mkdocs build --strict` passes: no broken link, no missing page, API pages render."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    out = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    config_page = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text()
    assert "training.steps" in config_page and "evolution.mode" in config_page
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "coevolve pool show" in cli_page
