"""Every distribution of the repository declares its licence as an SPDX string, with the
setuptools that reads one: the table form ({text = ...}) makes setuptools print a 12-line
deprecation notice per package on every `make setup` (issue 22)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pyprojects() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "pyproject.toml", "*/pyproject.toml", "*.toml.tmpl"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.split()
    return [REPO / p for p in out]


def test_licences_are_spdx_strings_and_setuptools_reads_them() -> None:
    files = _pyprojects()
    assert len(files) >= 9, files
    for path in files:
        text = path.read_text()
        if path.suffix == ".tmpl":
            text = text.replace("$name", "x").replace("$", "")
        data = tomllib.loads(text)
        lic = data["project"].get("license")
        assert lic is None or isinstance(lic, str), f"{path}: license = {lic!r}; write license = \"Apache-2.0\""
        if lic is not None:
            assert re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*", lic), f"{path}: {lic!r} is no SPDX expression"
        req = next(r for r in data["build-system"]["requires"] if r.startswith("setuptools"))
        low = tuple(int(x) for x in re.search(r">=\s*([\d.]+)", req).group(1).split("."))
        assert low >= (77,), f"{path}: {req}; setuptools reads an SPDX license string from 77 on"


def test_the_install_script_summarises_the_expected_pip_check_report() -> None:
    script = (REPO / "scripts" / "install-plugins.sh").read_text()
    assert "$PY -m pip check || true" not in script  # the 25-line report of bfcl-eval's skipped dependencies
    assert "coevolve_bfcl.install --quiet" in script
