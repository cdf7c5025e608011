"""examples/experiments/paired.py: one arm of one experiment against an arm of another, by seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "examples" / "experiments" / "paired.py"


def _summary(folder: Path, arm: str, success: dict[str, float], score: dict[str, float], label: str | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({arm: {"seeds": success, "mean_score": {"seeds": score}}}))
    if label:
        (folder / "summary-info.json").write_text(json.dumps({"machines": [{"label": label, "runs": []}]}))
    return folder


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_pairs_by_seed_and_prints_the_interval_and_the_machines(tmp_path: Path) -> None:
    a = _summary(tmp_path / "a", "static", {"0": 0.50, "1": 0.40, "2": 0.60}, {"0": 0.7, "1": 0.6, "2": 0.8}, "Xeon, 2 cores")
    b = _summary(tmp_path / "b", "static", {"0": 0.45, "1": 0.40, "2": 0.50, "9": 0.9}, {"0": 0.7, "1": 0.5, "2": 0.8}, None)
    r = _run(a, "static", b, "static")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "(machines: Xeon, 2 cores)" in out and "(machines: not recorded)" in out
    # seed 9 has no partner: the pairing uses seeds 0-2 only; differences +0.05, 0, +0.10
    assert "seed 2: A 0.600  B 0.500  A - B +0.100" in out and "seed 9" not in out
    success = out.split("mean score")[0]
    assert "A - B over 3 seeds: +0.050 [-0.074, +0.174]" in success
    assert "A - B over 3 seeds: +0.033" in out.split("mean score")[1]


def test_a_missing_arm_or_summary_is_named(tmp_path: Path) -> None:
    a = _summary(tmp_path / "a", "static", {"0": 0.5}, {"0": 0.7}, None)
    r = _run(a, "coevolve", a, "static")
    assert r.returncode == 2 and "has no arm 'coevolve'; it has: static" in r.stderr
    r = _run(tmp_path / "nowhere", "static", a, "static")
    assert r.returncode == 2 and "summary.json does not exist" in r.stderr
    assert _run(a).returncode == 2
