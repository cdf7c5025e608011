"""The published experiments' results files are what `coevolve experiment` wrote: every arm's
mean and interval are those of its seed values, and evidence.md quotes those means. The first
run (examples/experiments/warehouse.yaml, five seeds, 64 test tasks) keeps its files under
docs/evidence/first-run/; the powered run (warehouse-1k.yaml, ten seeds, 1,024 test tasks) is
docs/evidence/results.json."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from coevolve_sdk.experiment.stats import describe
from tests.conftest import REPO

EVIDENCE = REPO / "docs" / "evidence"
PUBLISHED = [
    (EVIDENCE / "first-run" / "results.json", REPO / "examples" / "experiments" / "warehouse.yaml"),
    (EVIDENCE / "results.json", REPO / "examples" / "experiments" / "warehouse-1k.yaml"),
]


def _finished(results: dict, spec: dict) -> dict[str, dict]:
    """The arms whose every seed of the experiment file has a result."""
    return {arm: r for arm, r in results.items() if all(str(s) in r["seeds"] for s in spec["seeds"])}


@pytest.mark.parametrize("results_path, experiment", PUBLISHED, ids=["first-run", "warehouse-1k"])
def test_results_hold_the_arms_of_the_experiment_file_with_their_statistics(results_path: Path, experiment: Path) -> None:
    import yaml

    results = json.loads(results_path.read_text())
    spec = yaml.safe_load(experiment.read_text())
    assert list(results) == [a["name"] for a in spec["arms"]]
    finished = _finished(results, spec)
    assert {"static", "coevolve", "random-exploration"} <= set(finished)
    for arm, r in finished.items():
        values = [r["seeds"][str(s)] for s in spec["seeds"]]
        assert len(values) >= 3 and all(0.0 <= v <= 1.0 for v in values), arm
        again = describe(values)
        assert math.isclose(r["mean"], sum(values) / len(values)), arm
        lo, hi = r["ci95"]
        assert math.isclose(lo, again["ci95"][0]) and math.isclose(hi, again["ci95"][1]), arm
        assert lo <= r["mean"] <= hi
        if "mean_score" in r:  # issue 19: the mean score beside success, per seed, with its own interval
            scores = [r["mean_score"]["seeds"][str(s)] for s in spec["seeds"]]
            assert math.isclose(r["mean_score"]["mean"], sum(scores) / len(scores)), arm


@pytest.mark.parametrize("results_path, experiment", PUBLISHED, ids=["first-run", "warehouse-1k"])
def test_the_evidence_page_quotes_the_published_means(results_path: Path, experiment: Path) -> None:
    import yaml

    page = (REPO / "docs" / "evidence.md").read_text()
    results = json.loads(results_path.read_text())
    spec = yaml.safe_load(experiment.read_text())
    assert f"coevolve experiment examples/experiments/{experiment.name} --jobs 2" in page
    for arm, r in _finished(results, spec).items():
        rows = [line for line in page.splitlines() if re.match(rf"^\| `?{re.escape(arm)}`? \|", line)]
        assert any(f"| {r['mean']:.3f} |" in row for row in rows), f"no table row gives arm {arm} its mean {r['mean']:.3f}"
