"""docs/evidence/results.json is what `coevolve experiment` wrote for the published experiment:
every arm has at least three seeds, and its mean and interval are those of its seed values."""

from __future__ import annotations

import json
import math
import re

from coevolve_sdk.experiment.stats import describe
from tests.conftest import REPO

RESULTS = REPO / "docs" / "evidence" / "results.json"
EXPERIMENT = REPO / "examples" / "experiments" / "warehouse.yaml"


def test_results_hold_every_arm_and_seed_of_the_experiment_file_with_their_statistics() -> None:
    import yaml

    results = json.loads(RESULTS.read_text())
    spec = yaml.safe_load(EXPERIMENT.read_text())
    assert list(results) == [a["name"] for a in spec["arms"]]
    for arm, r in results.items():
        values = [r["seeds"][str(s)] for s in spec["seeds"]]
        assert len(values) >= 3 and all(0.0 <= v <= 1.0 for v in values), arm
        again = describe(values)
        assert math.isclose(r["mean"], sum(values) / len(values)), arm
        lo, hi = r["ci95"]
        assert math.isclose(lo, again["ci95"][0]) and math.isclose(hi, again["ci95"][1]), arm
        assert lo <= r["mean"] <= hi


def test_the_evidence_page_quotes_the_published_means() -> None:
    page = (REPO / "docs" / "evidence.md").read_text()
    results = json.loads(RESULTS.read_text())
    assert "coevolve experiment examples/experiments/warehouse.yaml --jobs 2" in page
    for arm, r in results.items():
        rows = [line for line in page.splitlines() if re.match(rf"^\| `?{re.escape(arm)}`? \|", line)]
        assert any(f"| {r['mean']:.3f} |" in row for row in rows), f"no table row gives arm {arm} its mean {r['mean']:.3f}"
