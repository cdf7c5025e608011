"""The experiment file: presets resolve to the configs the docs describe, and every mistake is
an error that names the file, the arm and the field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.errors import ConfigError
from coevolve_sdk.experiment.presets import PRESETS

ALL_ARMS = [*PRESETS, "no-forgetting", "no-boundary", "no-rare"]  # the base config's detectors
from coevolve_sdk.experiment.spec import load_experiment, set_dotted
from tests.conftest import REPO, coevolve_cmd

BASE = REPO / "examples" / "kvstore-tiny.yaml"


def write(tmp_path: Path, doc: dict, name: str = "exp.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"base": str(BASE), "seeds": [0, 1], **doc}, sort_keys=False))
    return p


def arms(*names: str) -> list[dict]:
    return [{"name": n, "preset": n} for n in names]


def error(tmp_path: Path, doc: dict) -> str:
    with pytest.raises(ConfigError) as e:
        load_experiment(write(tmp_path, doc), tmp_path / "out")
    return str(e.value)


def test_presets_resolve_to_the_documented_arms(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, {"arms": arms(*ALL_ARMS), "baseline": "static"}), tmp_path / "out")
    cfg = {a.name: exp.config(a, 7) for a in exp.arms}
    z = cfg["zero-shot"]
    assert (z.training.steps, z.training.warm_start, z.evolution.enabled, z.eval.before) == (0, False, False, True)
    assert cfg["static"].evolution.enabled is False and cfg["static"].training.steps == 8
    assert (cfg["random-exploration"].evolution.enabled, cfg["random-exploration"].evolution.guidance) == (True, "random")
    assert (cfg["coevolve"].evolution.enabled, cfg["coevolve"].evolution.guidance) == (True, "signals")
    assert [d.name for d in cfg["coevolve"].detectors] == ["forgetting", "boundary", "rare"]
    for kind in ("forgetting", "boundary", "rare"):
        assert [d.name for d in cfg[f"no-{kind}"].detectors] == [k for k in ("forgetting", "boundary", "rare") if k != kind]
    # every run gets its seed and its own folder under the experiment folder
    assert cfg["static"].seed == 7 and Path(cfg["static"].run_dir) == (tmp_path / "out" / "runs" / "static" / "seed-7").resolve()
    # the zero-shot arm trains nothing, so it is outside the compute check; the others are equal
    assert set(exp.checks["compute"]["per_arm"]) == set(ALL_ARMS) - {"zero-shot"}
    assert exp.phase_of(exp.arm("zero-shot")) == "before" and exp.phase_of(exp.arm("coevolve")) == "after"


def test_arm_overrides_come_after_the_preset(tmp_path: Path) -> None:
    doc = {"arms": [{"name": "c", "preset": "coevolve", "overrides": {"evolution.guidance": "random", "evolution.every": 2,
                                                                       "detectors.0.options": {"window": 3}}}]}
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    t = exp.arms[0].template
    assert t.evolution.guidance == "random" and t.evolution.every == 2 and t.detectors[0].options == {"window": 3}


def test_base_overrides_apply_to_every_arm_before_presets(tmp_path: Path) -> None:
    doc = {"base_overrides": {"eval.every": 2, "detectors": [{"name": "forgetting"}, {"name": "rare"}]},
           "arms": arms("static", "no-rare")}
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    assert all(a.template.eval.every == 2 for a in exp.arms)
    assert [d.name for d in exp.arm("no-rare").template.detectors] == ["forgetting"]
    # the overridden base is what the arms are described against
    from coevolve_sdk.experiment.spec import plan_record

    changes = {a["name"]: a["changes"] for a in plan_record(exp)["arms"]}
    assert "eval.every" not in changes["static"] and changes["static"]["evolution.enabled"] == {"base": True, "arm": False}
    assert "base_overrides: Value error, 'seed' is set by the experiment" in error(tmp_path, {"base_overrides": {"seed": 1}, "arms": arms("static")})


def test_the_base_config_is_relative_to_the_experiment_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base.yaml").write_text(BASE.read_text())
    p = tmp_path / "sub" / "exp.yaml"
    p.write_text(yaml.safe_dump({"base": "base.yaml", "seeds": [0], "arms": arms("static")}))
    assert load_experiment(p).base_path == (tmp_path / "sub" / "base.yaml").resolve()
    p.write_text(yaml.safe_dump({"base": "nope.yaml", "seeds": [0], "arms": arms("static")}))
    with pytest.raises(ConfigError, match="relative to the experiment file"):
        load_experiment(p)


@pytest.mark.parametrize("doc,expected", [
    ({"arms": arms("static"), "sedes": [1]}, "sedes: Extra inputs are not permitted (this field does not exist"),
    ({"arms": [{"name": "a", "preset": "coevolv"}]}, "unknown preset 'coevolv'; the presets are: zero-shot, static"),
    ({"arms": arms("static", "static")}, "the names ['static'] appear more than once"),
    ({"arms": arms("static"), "seeds": [1, 1]}, "seeds: [1] appear more than once"),
    ({"arms": arms("static"), "seeds": []}, "seeds: List should have at least 1 item"),
    ({"arms": arms("static"), "baseline": "coevolve"}, "baseline: 'coevolve' is not an arm; the arms are ['static']"),
    ({"arms": arms("static", "coevolve"), "comparisons": [["coevolve", "random"]]}, "comparisons: ['random'] is not an arm; the arms are ['static', 'coevolve']"),
    ({"arms": arms("static", "coevolve"), "comparisons": [["coevolve", "coevolve"]]}, "compares an arm with itself"),
    ({"arms": arms("static", "coevolve"), "comparisons": [["coevolve"]]}, "comparisons: Value error, each entry is a pair [arm, against], e.g. [coevolve, random-exploration]; got ['coevolve']"),
    ({"arms": [{"name": "../x", "preset": "static"}]}, "arms.0.name: String should match pattern"),
    ({"arms": [{"name": "_experiment"}]}, "arms.0.name: String should match pattern"),
    ({"arms": [{"name": "a", "overrides": {"seed": 3}}]}, "'seed' is set by the experiment for every run"),
    ({"arms": [{"name": "a", "overrides": {"training.steps": -1}}]},
     "arms.0 ('a'), base config + preset + overrides: the configuration is not valid:\n  - training.steps: Input should be greater than or equal to 0"),
    ({"arms": [{"name": "a", "overrides": {"training.stepz": 3}}]}, "training.stepz: Extra inputs are not permitted"),
    ({"arms": [{"name": "a", "overrides": {"seed.x": 3}}]}, "'seed' holds a value (0), not settings to step into at 'seed.x'"),
    ({"arms": [{"name": "a", "overrides": {"detectors.5.name": "rare"}}]}, "'detectors' is a list of 3 items; '5' is not an index of it"),
    ({"arms": [{"name": "a", "overrides": {"detectors.0.options.bogus": 1}}]}, "arm 'a': the configuration is not valid:\n  - detectors.0.options.bogus"),
    ({"arms": [{"name": "a", "overrides": {"teacher.name": "oracle"}}]}, "arm 'a': teacher.name:"),
    ({"arms": [{"name": "a", "preset": "static"}, {"name": "b", "preset": "coevolve", "overrides": {"eval.max_tasks": 4}}]},
     "arms are evaluated on different held-out tasks (a: split=test, max_tasks=16, b: split=test, max_tasks=4)"),
    ({"arms": [{"name": "a", "preset": "zero-shot"}], "metric": {"phase": "after"}}, "arm 'a' does not train (training.steps=0)"),
    ({"arms": [{"name": "a", "preset": "static", "overrides": {"eval.after": False}}]}, "sets eval.after: false"),
    ({"arms": [{"name": "a", "preset": "static"}], "metric": {"key": "reward"}}, "metric.key: Input should be 'success_rate' or 'mean_score'"),
])
def test_mistakes_are_named(tmp_path: Path, doc: dict, expected: str) -> None:
    assert expected in error(tmp_path, doc)


def test_ablation_of_a_detector_the_base_does_not_have(tmp_path: Path) -> None:
    msg = error(tmp_path, {"arms": [{"name": "a", "preset": "no-rare", "overrides": {}}, ]} | {"base": str(_base_without_rare(tmp_path))})
    assert "preset 'no-rare' drops the 'rare' detector, but the base config's detectors are ['forgetting', 'boundary']" in msg
    msg = error(tmp_path, {"arms": [{"name": "a", "preset": "coevolve"}], "base": str(_base_without_rare(tmp_path, detectors=[]))})
    assert "preset 'coevolve' needs detectors" in msg


def _base_without_rare(tmp_path: Path, detectors: list | None = None) -> Path:
    raw = yaml.safe_load(BASE.read_text())
    raw["detectors"] = [{"name": "forgetting"}, {"name": "boundary"}] if detectors is None else detectors
    p = tmp_path / "base-few.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_unequal_training_compute_is_refused_unless_declared(tmp_path: Path) -> None:
    doc = {"arms": [{"name": "static", "preset": "static"},
                    {"name": "long", "preset": "coevolve", "overrides": {"training.steps": 16}}]}
    msg = error(tmp_path, doc)
    assert "the training arms differ in compute" in msg and "long: 16 steps × 4 tasks × group 4 = 256 rollouts" in msg
    assert "static: 8 steps × 4 tasks × group 4 = 128 rollouts" in msg and "unequal_compute: true" in msg
    # the same budget spent differently is equal compute
    doc["arms"][1]["overrides"] = {"training.steps": 4, "training.tasks_per_step": 8}
    assert load_experiment(write(tmp_path, doc), tmp_path / "out").checks["compute"]["equal"]
    # a warm start in one arm only is unequal too
    doc["arms"][1]["overrides"] = {"training.warm_start": False}
    assert "warm start off" in error(tmp_path, doc)
    doc["arms"][1]["overrides"] = {"training.steps": 16}
    doc["arms"][1]["unequal_compute"] = True
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    assert "exempt (unequal_compute): long" in exp.checks["compute"]["note"]


def test_teacher_budget_check(tmp_path: Path) -> None:
    doc = {"arms": arms("random-exploration", "coevolve")}
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    assert exp.checks["teacher_budget"]["equal"] is True and "no evolution.max_admitted_per_round" in exp.checks["teacher_budget"]["note"]
    for a in doc["arms"]:
        a["overrides"] = {"evolution.max_admitted_per_round": 4}
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    assert exp.checks["teacher_budget"]["note"].endswith("admitted-task budget (4 per round) in every evolving arm")
    doc["arms"][1]["overrides"] = {"evolution.max_admitted_per_round": 8}
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    assert exp.checks["teacher_budget"]["equal"] is False
    assert "coevolve vs random-exploration (in max_admitted_per_round)" in exp.checks["teacher_budget"]["note"]


def test_teacher_budget_check_names_the_pair_that_differs(tmp_path: Path) -> None:
    # a guided variant with other teacher options added beside coevolve leaves coevolve's pairing
    # with random exploration fair: the note says which pair differs, in which setting
    doc = {"arms": arms("random-exploration", "coevolve", "coevolve")}
    doc["arms"][2]["name"] = "coevolve-varied"
    doc["arms"][2]["overrides"] = {"teacher.options.variation": 0.5}
    exp = load_experiment(write(tmp_path, doc), tmp_path / "out")
    check = exp.checks["teacher_budget"]
    assert check["equal"] is False
    assert check["pairs"]["coevolve vs random-exploration"]["equal"] is True
    assert check["pairs"]["coevolve-varied vs random-exploration"]["differs"] == ["teacher.options.variation"]
    assert "coevolve-varied vs random-exploration (in teacher.options.variation)" in check["note"]
    assert check["note"].endswith("the same for coevolve vs random-exploration")


def test_set_dotted_creates_mappings_like_set() -> None:
    raw: dict = {"a": {"b": 1}, "l": [{"x": 1}]}
    set_dotted(raw, "a.c.d", 2)
    set_dotted(raw, "l.0.x", 5)
    assert raw == {"a": {"b": 1, "c": {"d": 2}}, "l": [{"x": 5}]}


def test_cli_reports_a_bad_experiment_file_without_a_traceback(tmp_path: Path, sub_env: dict[str, str]) -> None:
    p = write(tmp_path, {"arms": [{"name": "a", "preset": "coevolv"}]})
    out = subprocess.run([*coevolve_cmd(), "experiment", str(p)], capture_output=True, text=True, env=sub_env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "unknown preset 'coevolv'" in out.stderr and "Traceback" not in out.stderr
    missing = subprocess.run([*coevolve_cmd(), "experiment", "summarize", str(tmp_path)], capture_output=True, text=True, env=sub_env, timeout=120)
    assert missing.returncode == 2 and "is not an experiment folder (no experiment.json)" in missing.stderr
