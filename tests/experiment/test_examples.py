"""Every experiment file under examples/experiments/ resolves and passes the fairness checks, and
docs/experiments.md describes the presets and the example file that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.experiment.presets import PRESETS
from coevolve_sdk.experiment.spec import load_experiment
from tests.conftest import REPO

EXPERIMENTS = sorted((REPO / "examples" / "experiments").glob("*.yaml"))
DOC = REPO / "docs" / "experiments.md"


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_example_experiment_resolves(path: Path, tmp_path: Path) -> None:
    exp = load_experiment(path, tmp_path / "out")
    assert exp.arms and exp.spec.seeds
    for arm in exp.arms:
        for seed in exp.spec.seeds:
            cfg = exp.config(arm, seed)
            assert cfg.seed == seed and Path(cfg.run_dir).is_relative_to(tmp_path / "out")


def test_docs_list_every_preset_with_its_overrides(tmp_path: Path) -> None:
    text = DOC.read_text()
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([a-z<>-]+)` \| (.*?) \|", text, re.MULTILINE)}
    assert set(PRESETS) | {"no-<detector>"} <= set(rows), f"presets missing from {DOC.name}: {set(PRESETS) - set(rows)}"
    base = yaml.safe_load((REPO / "examples" / "kvstore-tiny.yaml").read_text())
    for name in ("zero-shot", "static", "random-exploration", "coevolve"):
        for key, value in PRESETS[name].overrides(base).items():
            shown = f"`{key}: {yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}`"
            assert shown in rows[name], f"{DOC.name}: preset {name} should say {shown}"


def test_docs_example_is_the_example_file() -> None:
    block = re.search(r"<!-- file: examples/experiments/kvstore-smoke.yaml -->\n```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert block is not None
    assert yaml.safe_load(block[1]) == yaml.safe_load((REPO / "examples" / "experiments" / "kvstore-smoke.yaml").read_text())
