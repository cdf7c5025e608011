"""The experiment files shipped under examples/experiments/ are sound before anyone spends GPU
hours on them: each resolves through the real loader into validated run configs, changes the
base config only where its presets and overrides say, gives every training arm the same compute
(the loader's own fairness check, which is shown to fire on these very files), and the
paper-size files hold the paper's seven arms. Nothing is run and nothing is downloaded:
components are resolved by name and their options validated, never built."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.config import RunConfig, validate_components
from coevolve_sdk.errors import ConfigError
from coevolve_sdk.experiment.presets import preset_names
from coevolve_sdk.experiment.spec import differences, load_experiment
from coevolve_sdk.components.registry import get_registry
from tests.conftest import REPO

EXAMPLES = REPO / "examples" / "experiments"
FILES = sorted(EXAMPLES.glob("*.yaml"))  # a glob: files added later are checked too
#: the paper-size files; each is based on the run config of the same name in examples/
PAPER = ["paper-bfcl-qwen3-4b.yaml", "paper-appworld-qwen3-4b.yaml"]
PAPER_ARMS = ["zero-shot", "static", "random-exploration", "coevolve", "no-forgetting", "no-boundary", "no-rare"]


def _covered(key: str, allowed: set[str]) -> bool:
    return any(key == a or key.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_arm_resolves_to_a_valid_config_and_nothing_runs(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    exp = load_experiment(path, out)
    assert not out.exists(), "loading an experiment must not create its folder or start a run"
    base = RunConfig.model_validate({**exp.base_raw, "run_dir": "unset", "seed": 0})
    reg = get_registry()
    for arm in exp.arms:
        # the arm is the base changed exactly where its preset and its own overrides say
        allowed = set(arm.preset_overrides) | set(arm.own_overrides)
        changed = differences(base, arm.template)
        assert all(_covered(k, allowed) for k in changed), f"{arm.name}: changes not named by its preset or overrides: {changed}"
        for key in allowed:  # ...and every one of them took effect (none shadowed by a later one)
            value = arm.template.model_dump(mode="json")
            for part in key.split("."):
                value = value[int(part)] if isinstance(value, list) else value[part]
            wanted = arm.own_overrides.get(key, arm.preset_overrides.get(key))
            if isinstance(wanted, list):
                assert [d["name"] if isinstance(d, dict) else d for d in value] == [d["name"] if isinstance(d, dict) else d for d in wanted]
            else:
                assert value == wanted, f"{arm.name}: {key} is {value!r}, the file asks for {wanted!r}"
        for seed in exp.spec.seeds:
            cfg = exp.config(arm, seed)
            assert cfg.seed == seed and Path(cfg.run_dir).is_relative_to(out)
            # the per-run config the experiment would write is a valid run config on its own
            again = RunConfig.model_validate(yaml.safe_load(yaml.safe_dump(cfg.model_dump(mode="json"))))
            assert again == cfg
        for module in arm.template.plugins:
            reg.add_module(module)
        validate_components(arm.template, reg, source=f"{path.name}: {arm.name}")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_training_arms_have_equal_compute_and_the_check_would_notice(path: Path, tmp_path: Path) -> None:
    exp = load_experiment(path, tmp_path / "out")
    compute = exp.checks["compute"]
    assert compute["equal"] is True
    checked = [a for a in exp.arms if a.trains and not a.unequal_compute]
    assert set(compute["per_arm"]) == {a.name for a in exp.arms if a.trains}
    assert len({(a.rollouts, a.template.training.warm_start) for a in checked}) <= 1
    if len(checked) < 2:
        return
    # one more step in one training arm of this very file: the loader refuses the experiment
    doc = yaml.safe_load(path.read_text())
    doc["base"] = str((path.parent / doc["base"]).resolve())
    bumped = copy.deepcopy(doc)
    i = next(i for i, a in enumerate(doc["arms"]) if a["name"] == checked[-1].name)
    bumped["arms"][i].setdefault("overrides", {})["training.steps"] = checked[-1].template.training.steps + 1
    bad = tmp_path / path.name
    bad.write_text(yaml.safe_dump(bumped, sort_keys=False))
    with pytest.raises(ConfigError, match="differ in compute"):
        load_experiment(bad, tmp_path / "out2")


@pytest.mark.parametrize("name", PAPER, ids=str)
def test_paper_files_hold_the_papers_arms(name: str, tmp_path: Path) -> None:
    exp = load_experiment(EXAMPLES / name, tmp_path / "out")
    assert exp.base_path == (REPO / "examples" / name).resolve()
    assert [a.name for a in exp.arms] == PAPER_ARMS and [a.preset for a in exp.arms] == PAPER_ARMS
    assert set(PAPER_ARMS) == set(preset_names(exp.base_raw))
    assert exp.spec.seeds == [0, 1, 2] and exp.spec.baseline == "static"
    cfg = {a.name: a.template for a in exp.arms}
    base = RunConfig.model_validate({**exp.base_raw, "run_dir": "unset", "seed": 0})
    # zero-shot is the released model, untrained, evaluated once before training
    z = exp.arm("zero-shot")
    assert not z.trains and exp.phase_of(z) == "before" and cfg["zero-shot"].policy == base.policy
    assert cfg["zero-shot"].training.warm_start is False
    # every training arm: the paper's 120 steps x 32 tasks x group 8 from the instruct model
    for arm in exp.arms[1:]:
        assert arm.trains and arm.rollouts == 120 * 32 * 8 and not arm.template.training.warm_start
        assert arm.template.policy == base.policy and arm.template.teacher == base.teacher
    assert not cfg["static"].evolution.enabled
    assert (cfg["random-exploration"].evolution.guidance, cfg["coevolve"].evolution.guidance) == ("random", "signals")
    assert exp.checks["teacher_budget"]["equal"] is True and exp.checks["teacher_budget"]["budget_set"] is True
    assert exp.checks["environment"]["equal"] is True


def test_the_smollm2_bench_writes_an_experiment_that_loads_from_a_relative_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # bench/gpu/smollm2_warehouse.py --out runs/x: its experiment file once named its base by the
    # path from the working directory, which the loader reads relative to the experiment file
    import importlib.util

    spec = importlib.util.spec_from_file_location("smollm2_bench", REPO / "bench" / "gpu" / "smollm2_warehouse.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.chdir(tmp_path)
    out = Path("runs") / "smoke"
    out.mkdir(parents=True)
    size = bench.SIZES["cpu-smoke"]
    base = out / "base.yaml"
    base.write_text(yaml.safe_dump(bench.base_config("smollm2-135m", size, "hf", out)))
    (out / "experiment.yaml").write_text(yaml.safe_dump(bench.experiment_file(base, size, out)))
    exp = load_experiment(out / "experiment.yaml")
    assert exp.base_path == base.resolve() and [a.name for a in exp.arms] == ["static", "coevolve"]
    assert exp.out == (tmp_path / "runs" / "smoke" / "experiment").resolve()
