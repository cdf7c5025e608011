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


def test_folders_joined_by_commas_pool_their_seeds_and_the_power_line(tmp_path: Path) -> None:
    """An experiment repeated on new seeds lives in a folder of its own: both are read together."""
    a1 = _summary(tmp_path / "a1", "coevolve", {"0": 0.52, "1": 0.41}, {"0": 0.7, "1": 0.6}, "Xeon, 2 cores")
    a2 = _summary(tmp_path / "a2", "coevolve", {"6": 0.61, "7": 0.45}, {"6": 0.8, "7": 0.6}, "Xeon, 2 cores")
    b1 = _summary(tmp_path / "b1", "static", {"0": 0.50, "1": 0.40}, {"0": 0.7, "1": 0.6}, None)
    b2 = _summary(tmp_path / "b2", "static", {"6": 0.60, "7": 0.40}, {"6": 0.8, "7": 0.6}, None)
    r = _run(f"{a1},{a2}", "coevolve", f"{b1},{b2}", "static", "--effect", "1.5")
    assert r.returncode == 0, r.stderr
    success = r.stdout.split("mean score")[0]
    # differences +2, +1, +1, +5 points: mean +2.25, SD 1.89 points
    assert "seed 7: A 0.450  B 0.400  A - B +0.050" in success and "A - B over 4 seeds: +0.022" in success
    assert "(machines: Xeon, 2 cores)" in r.stdout  # one label, not one per folder
    # the t approximation: the smallest n with sqrt(n) * 1.5 / 1.89 >= t(.975, n-1) + t(.8, n-1)
    assert "SD of A - B 1.9 points: 15 seeds for 80% power at a true difference of 1.5 points" in success
    # a seed in two of the joined folders is refused, as is a bad --effect
    r = _run(f"{a1},{a1}", "coevolve", b1, "static")
    assert r.returncode == 2 and "seed 0 of arm 'coevolve' is in both" in r.stderr
    assert _run(a1, "coevolve", b1, "static", "--effect", "0").returncode == 2
    assert "--effect needs a number" in _run(a1, "coevolve", b1, "static", "--effect").stderr


def test_seeds_for_power_follows_the_t_approximation() -> None:
    from coevolve_sdk import seeds_for_power

    # z-approximation ((1.96 + 0.84) * 2 / 1.5)^2 = 13.9; the t quantiles of small n ask for more
    assert seeds_for_power(2.0, 1.5) == 16
    assert seeds_for_power(2.0, 3.0) < seeds_for_power(2.0, 1.5) < seeds_for_power(2.0, 1.0)
    assert seeds_for_power(0.0, 1.0) == 2
    assert seeds_for_power(2.0, 0.0) is None and seeds_for_power(2.0, -1.0) is None
