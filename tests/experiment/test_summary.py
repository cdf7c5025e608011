"""The summary of an experiment, computed from real run stores with known contents: the metric
each arm is judged by, the statistics, the paired differences, unfinished runs left out, and
the curves, signals and pool composition that explain a difference."""

from __future__ import annotations

import csv
from xml.etree import ElementTree
import json
import math
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.experiment.spec import load_experiment, plan_record
from coevolve_sdk.experiment.summary import summarize
from coevolve_sdk.storage.machine import machine_facts
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.records import Task, Trajectory
from coevolve_sdk.evolution.validation import EVAL_REQUEST_REASON
from tests.conftest import REPO

T2 = 4.302653  # t(0.975, 2)
T1 = 12.706205  # t(0.975, 1)
AFTER = {"zero-shot": [0.0, 0.125, 0.0], "static": [0.25, 0.5, 0.75], "coevolve": [0.5, 0.625, 0.9]}


def no_nan(x: str) -> None:
    raise AssertionError(f"summary.json holds {x}, which is not JSON")


@pytest.fixture(scope="module")
def summarized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    """Stores of 3 arms x 3 seeds with known evaluations, rounds and tasks, summarised once."""
    tmp_path = tmp_path_factory.mktemp("experiment")
    doc = {"base": str(REPO / "examples" / "kvstore-tiny.yaml"), "seeds": [0, 1, 2], "baseline": "static", "comparisons": [["coevolve", "zero-shot"]],
           "base_overrides": {"eval.every": 4}, "arms": [{"name": n, "preset": n} for n in AFTER]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(doc))
    exp = load_experiment(tmp_path / "exp.yaml", tmp_path / "out")
    (exp.out / "experiment.json").parent.mkdir(parents=True)
    (exp.out / "experiment.json").write_text(json.dumps(plan_record(exp)))
    for arm, values in AFTER.items():
        for seed, value in enumerate(values):
            store = RunStore(exp.run_dir(arm, seed) / "run.sqlite")
            if (arm, seed) != ("static", 0):  # that one as if written before runs recorded their machine
                # this machine; the coevolve runs as if on a CPU whose torch kernels are AVX2
                facts = machine_facts() | ({"torch_cpu_kernels": "AVX2"} if arm == "coevolve" else {})
                store.set_meta("machines", [{"step": 0, "started": f"2026-12-07T0{seed}:00:00+00:00", **facts}])
            store.add_tasks([Task(env="kvstore", query=f"seed task {i}") for i in range(2)], step=0)
            if arm == "zero-shot":
                store.record_eval(0, "before", "test", {"tasks": 16, "success_rate": value, "mean_score": value / 2 + 0.5})
            else:
                store.record_eval(0, "before", "test", {"tasks": 16, "success_rate": 0.0, "mean_score": 0.0})
                store.record_eval(4, "during", "test", {"tasks": 16, "success_rate": value / 2, "mean_score": value / 2})
            if arm == "coevolve":
                synth = [Task(env="kvstore", query=f"synthetic {seed} {i}", origin="synthetic") for i in range(3)]
                store.add_tasks(synth, step=4)
                # training sampled the first `seed + 1` of them (twice the first): trained on 1 and 2 of 3
                store.record_step(5, [Trajectory(task_id=t.id, score=0.0) for t in [synth[0], *synth[: seed + 1]]], [], {})
                store.record_round(1, 4, {"by_kind": {"boundary": 2, "rare": seed}, "accepted": 3, "candidates": 5,
                                          "rejection_reasons": {EVAL_REQUEST_REASON: seed},
                                          "probed": 2 + seed, "probe_rollouts": 4 * (2 + seed), "too_easy": seed, "too_hard": 1})
                if seed == 0:  # a second round in one seed only
                    store.record_round(2, 8, {"by_kind": {"forgetting": 4}, "accepted": 1, "candidates": 2})
            if arm == "coevolve" and seed == 2:  # still training: no final row, not finished
                store.set_meta("status", "running")
            else:
                if arm != "zero-shot":
                    store.record_eval(8, "after", "test", {"tasks": 16, "success_rate": value, "mean_score": value / 2 + 0.5})
                store.set_meta("status", "finished")
            store.close()
    return (exp.out, *summarize(exp.out))


def test_statistics_per_arm_and_paired(summarized: tuple[Path, dict, dict]) -> None:
    experiment, s, info = summarized
    z, st, co = s["zero-shot"], s["static"], s["coevolve"]
    # the zero-shot arm is judged on its only evaluation, the one before training
    assert z["metric_phase"] == "before" and z["seeds"] == {"0": 0.0, "1": 0.125, "2": 0.0}
    # static: 0.25, 0.5, 0.75 -> mean 0.5, std 0.25
    assert st["seeds"] == {"0": 0.25, "1": 0.5, "2": 0.75} and st["mean"] == pytest.approx(0.5) and st["std"] == pytest.approx(0.25)
    assert st["ci95"] == pytest.approx([0.5 - T2 * 0.25 / math.sqrt(3), 0.5 + T2 * 0.25 / math.sqrt(3)], abs=1e-5)
    assert "paired_vs_baseline" not in st
    # the unfinished coevolve run is left out, and said to be
    assert co["seeds"] == {"0": 0.5, "1": 0.625} and co["missing"] == ["2"] and co["n"] == 2
    p = co["paired_vs_baseline"]
    # differences 0.25 and 0.125: mean 0.1875, std 0.125 / sqrt(2)
    sd = 0.125 / math.sqrt(2)
    assert p["baseline"] == "static" and p["seeds"] == pytest.approx({"0": 0.25, "1": 0.125}) and p["n"] == 2
    assert p["ci95"] == pytest.approx([0.1875 - T1 * sd / math.sqrt(2), 0.1875 + T1 * sd / math.sqrt(2)], abs=1e-5)
    assert info["runs"]["coevolve/seed-2"] == "running" and info["checks"]["compute"]["equal"]
    # summary.json maps arm names to results and nothing else (docs/evidence/results.json is a copy)
    on_disk = json.loads((experiment / "summary.json").read_text(), parse_constant=no_nan)
    assert list(on_disk) == list(AFTER) and all({"seeds", "mean", "ci95"} <= set(v) for v in on_disk.values())
    assert json.loads((experiment / "summary-info.json").read_text(), parse_constant=no_nan) == info


def test_the_machines_the_runs_ran_on_are_listed(summarized: tuple[Path, dict, dict]) -> None:
    """A seed repeats its numbers only on the same kind of CPU with the same packages: the summary
    groups the runs by machine (start times aside) and says so when there is more than one."""
    experiment, _, info = summarized
    by_runs = {tuple(m["runs"]): m for m in info["machines"]}
    here = by_runs[("zero-shot/seed-0", "zero-shot/seed-1", "zero-shot/seed-2", "static/seed-1", "static/seed-2")]
    other = by_runs[("coevolve/seed-0", "coevolve/seed-1", "coevolve/seed-2")]  # the unfinished run ran somewhere too
    unknown = by_runs[("static/seed-0",)]
    assert here["facts"] == {k: v for k, v in machine_facts().items() if k != "source_commit"} and other["facts"]["torch_cpu_kernels"] == "AVX2"
    assert unknown["facts"] == {} and "not recorded" in unknown["label"]
    md = (experiment / "summary.md").read_text()
    assert "The runs ran on 3 different machines, package sets or thread counts" in md
    assert f"- {here['label']}: 5 runs" in md and "torch kernels AVX2" in md
    # which code: the commit of this checkout (where one is recorded), grouped apart from the machines
    assert "source_commit" not in here["facts"]
    sha = machine_facts().get("source_commit")
    if sha is None:  # the SDK installed as a package, not a checkout: nothing to read
        assert list(info["source_commits"]) == ["unknown"]
    else:
        assert sorted(info["source_commits"][sha]) == sorted(set(info["runs"]) - {"static/seed-0"})
        assert info["source_commits"]["unknown"] == ["static/seed-0"] and f"`{sha[:12]}` 8 runs" in md


def test_mean_score_beside_success_with_its_own_intervals(summarized: tuple[Path, dict, dict]) -> None:
    """Issue 19: the mean score of the same final evaluations, per arm and seed, with its interval
    and its paired difference, in summary.json, summary.csv and summary.md."""
    experiment, s, _ = summarized
    st, co = s["static"]["mean_score"], s["coevolve"]["mean_score"]
    assert st["seeds"] == pytest.approx({"0": 0.625, "1": 0.75, "2": 0.875}) and st["mean"] == pytest.approx(0.75)
    assert co["seeds"] == pytest.approx({"0": 0.75, "1": 0.8125}) and co["n"] == 2  # the running seed left out
    assert s["zero-shot"]["mean_score"]["seeds"] == pytest.approx({"0": 0.5, "1": 0.5625, "2": 0.5})  # its 'before' row
    p = co["paired_vs_baseline"]
    sd = 0.0625 / math.sqrt(2)  # differences 0.125 and 0.0625
    assert p["baseline"] == "static" and p["mean"] == pytest.approx(0.09375)
    assert p["ci95"] == pytest.approx([0.09375 - T1 * sd / math.sqrt(2), 0.09375 + T1 * sd / math.sqrt(2)], abs=1e-5)
    assert "paired_vs_baseline" not in st and s["coevolve"]["mean"] != co["mean"]
    rows = {r["arm"]: r for r in csv.DictReader((experiment / "summary.csv").open())}
    assert float(rows["coevolve"]["mean_score_mean"]) == pytest.approx(0.78125)
    assert float(rows["coevolve"]["mean_score_diff_mean"]) == pytest.approx(0.09375) and rows["static"]["mean_score_diff_mean"] == ""
    md = (experiment / "summary.md").read_text()
    assert "Beside it, `mean_score` of the same evaluations" in md and "| coevolve | 2 | 0.781 |" in md and "0.094 (n=2)" in md
    page = (experiment / "experiment.html").read_text()
    assert 'id="beside"' in page and "<td>0.094 (n=2)</td>" in page


def test_further_comparisons_pair_the_named_arms(summarized: tuple[Path, dict, dict]) -> None:
    """Issue 19 (4): CoEvolve is judged against static and against random exploration; an
    experiment file names the second pair in `comparisons` and the summary reports it."""
    experiment, s, info = summarized
    p = s["coevolve"]["paired_vs"]["zero-shot"]  # success: 0.5 - 0.0 and 0.625 - 0.125 (the running seed left out)
    assert p["seeds"] == pytest.approx({"0": 0.5, "1": 0.5}) and p["n"] == 2 and p["mean"] == pytest.approx(0.5)
    q = s["coevolve"]["mean_score"]["paired_vs"]["zero-shot"]  # 0.75 - 0.5, 0.8125 - 0.5625
    assert q["mean"] == pytest.approx(0.25) and "paired_vs" not in s["static"]
    assert info["comparisons"] == [["coevolve", "zero-shot"]]
    md = (experiment / "summary.md").read_text()
    assert "| coevolve | zero-shot | 2 | 0.500 |" in md and "0.250 |" in md


def test_curves_signals_and_pool(summarized: tuple[Path, dict, dict]) -> None:
    s = summarized[1]
    c = s["static"]["curve"]
    assert c["steps"] == [0, 4, 8] and c["n"] == [3, 3, 3]
    assert c["mean"] == pytest.approx([0.0, 0.25, 0.5])
    assert s["zero-shot"]["curve"]["steps"] == [0]
    # issue 19 (3): every seed's own curve beside the mean (before, during = half the final value, after)
    assert c["seeds"] == {str(seed): {"steps": [0, 4, 8], "values": pytest.approx([0.0, v / 2, v])}
                          for seed, v in enumerate(AFTER["static"])}
    assert set(s["coevolve"]["curve"]["seeds"]) == {"0", "1"}  # the running seed has no curve yet
    ev = s["coevolve"]["evolution"]  # over the two finished seeds
    assert ev["rounds"]["1"]["signals"] == pytest.approx({"boundary": 2.0, "rare": 0.5})
    assert ev["rounds"]["1"]["admitted"] == 3.0 and ev["rounds"]["1"]["proposed"] == 5.0 and ev["rounds"]["1"]["seeds"] == 2
    # a round only one seed reached is that seed's numbers, not halved by the seed without it
    assert ev["rounds"]["2"] == {"step": 8, "signals": {"forgetting": 4.0}, "admitted": 1.0, "proposed": 2.0, "seeds": 1}
    assert ev["rounds_per_run"] == 1.5 and ev["admitted_per_round"] == pytest.approx(7 / 3)
    pool = ev["pool"]
    assert pool["steps"] == list(range(9))
    assert pool["by_origin"]["seed"] == [2.0] * 9
    assert pool["by_origin"]["synthetic"] == [0.0] * 4 + [3.0] * 5
    assert ev["final_pool"] == {"seed": 2.0, "synthetic": 3.0}
    assert s["static"]["evolution"]["rounds"] == {} and s["static"]["evolution"]["admitted_per_round"] is None


def test_files_a_person_reads(summarized: tuple[Path, dict, dict]) -> None:
    experiment = summarized[0]
    rows = list(csv.DictReader((experiment / "summary.csv").open()))
    assert [r["arm"] for r in rows] == ["zero-shot", "static", "coevolve"]
    assert rows[2]["seed_2"] == "" and float(rows[2]["diff_mean"]) == pytest.approx(0.1875) and rows[2]["n_paired"] == "2"
    md = (experiment / "summary.md").read_text()
    assert "| coevolve | coevolve | 2 | 0.562 |" in md and "0.188 (n=2)" in md
    assert "coevolve/seed-2 (running)" in md and "`evolution.enabled`: true → false" in md
    page = (experiment / "experiment.html").read_text()
    for svg in ("final.svg", "curves.svg", "curves-per-seed.svg", "pool.svg", "evolution.svg"):
        assert f'src="plots/{svg}"' in page
        chart = ElementTree.parse(experiment / "plots" / svg).getroot()  # well-formed, and drawn
        assert chart.tag.endswith("svg") and len(chart.findall(".//{http://www.w3.org/2000/svg}text")) > 5, svg
    # one panel per training arm, one line per finished seed and the mean (zero-shot does not train)
    per_seed = ElementTree.parse(experiment / "plots" / "curves-per-seed.svg").getroot()
    titles = [t.text for t in per_seed.iter("{http://www.w3.org/2000/svg}text")]
    assert "static" in titles and "coevolve" in titles and "zero-shot" not in titles
    assert len(list(per_seed.iter("{http://www.w3.org/2000/svg}polyline"))) == 3 + 1 + 2 + 1, titles


def test_tasks_admitted_and_trained_on_per_arm_and_seed_from_the_stores(summarized: tuple[Path, dict, dict]) -> None:
    """Issue 19 (1d): what happened, counted in each run's store, not what the config allowed."""
    experiment, s, _ = summarized
    co = s["coevolve"]
    assert co["admitted_tasks"] == {"0": 3, "1": 3} and co["trained_on_admitted"] == {"0": 1, "1": 2}
    assert co["mean_admitted_tasks"] == 3.0 and co["mean_trained_on_admitted"] == 1.5
    assert co["rejected_eval_requests"] == {"0": 0, "1": 1}
    assert s["static"]["admitted_tasks"] == {"0": 0, "1": 0, "2": 0} and s["static"]["trained_on_admitted"] == {"0": 0, "1": 0, "2": 0}
    on_disk = json.loads((experiment / "summary.json").read_text(), parse_constant=no_nan)
    assert on_disk["coevolve"]["trained_on_admitted"] == {"0": 1, "1": 2}
    md = (experiment / "summary.md").read_text()
    assert "| coevolve | 3.0 | 1.5 | 3 / 1 | 3 / 2 (1 evaluation requests rejected) | – |" in md
    assert "<table id=\"tasks\">" in (experiment / "experiment.html").read_text()


def test_what_the_learnability_probe_cost_and_left_out_per_run(summarized: tuple[Path, dict, dict]) -> None:
    """evolution.admission_probe's rollouts are compute beside training's: the summary counts
    them per run from the round records (finished seeds 0 and 1), so arms compare on what happened."""
    experiment, s, _ = summarized
    assert s["coevolve"]["evolution"]["probe_per_run"] == pytest.approx(
        {"probed": 2.5, "probe_rollouts": 10.0, "too_easy": 0.5, "too_hard": 1.0})
    assert s["static"]["evolution"]["probe_per_run"] is None
    assert "- coevolve: 2.5 tried, 10 rollouts; 0.5 always solved, 1.0 never solved" in (experiment / "summary.md").read_text()


def test_what_rl_added_to_the_warm_start_per_arm(summarized: tuple[Path, dict, dict]) -> None:
    """Issue 19 (2): an arm's final score mixes the warm start and RL; the summary gives each
    training arm's gain from its first evaluation after the warm start to its last, on the same
    tasks, with an interval over seeds (none for an arm that does not train)."""
    experiment, s, _ = summarized
    g = s["static"]["rl_gain"]  # 'before' 0.0 at step 0 in every training run, 'after' the AFTER values
    assert g["seeds"] == pytest.approx({"0": 0.25, "1": 0.5, "2": 0.75}) and g["mean"] == pytest.approx(0.5) and g["tasks"] == 16
    assert g["ci95"] == pytest.approx([0.5 - T2 * 0.25 / math.sqrt(3), 0.5 + T2 * 0.25 / math.sqrt(3)], abs=1e-5)
    assert s["static"]["mean_score"]["rl_gain"]["seeds"] == pytest.approx({"0": 0.625, "1": 0.75, "2": 0.875})
    assert s["coevolve"]["rl_gain"]["n"] == 2  # the running seed has no final evaluation
    assert s["zero-shot"]["rl_gain"] is None and s["zero-shot"]["mean_score"]["rl_gain"] is None
    md = (experiment / "summary.md").read_text()
    assert "During RL" in md and "| static | 3 | 16 | 0.500 |" in md and "zero-shot | 3 | 16" not in md
    page = (experiment / "experiment.html").read_text()
    assert 'id="rl-gain"' in page and "<tr><td>static</td><td>3</td><td>16</td><td>0.500</td>" in page


def test_rl_gain_compares_the_same_tasks_or_nothing(tmp_path: Path) -> None:
    """With eval.subset the final evaluation scores the whole split and the first N tasks apart:
    the gain takes the N-task figure (the tasks the first evaluation scored); a final row on other
    tasks without that figure gives no gain rather than a difference between two task sets."""
    doc = {"base": str(REPO / "examples" / "kvstore-tiny.yaml"), "seeds": [0, 1], "arms": [{"name": "static", "preset": "static"}]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(doc))
    exp = load_experiment(tmp_path / "exp.yaml", tmp_path / "out")
    exp.out.mkdir(parents=True)
    (exp.out / "experiment.json").write_text(json.dumps(plan_record(exp)))
    for seed in (0, 1):
        store = RunStore(exp.run_dir("static", seed) / "run.sqlite")
        store.record_eval(0, "before", "test", {"tasks": 128 if seed == 0 else 100, "success_rate": 0.4, "mean_score": 0.6})
        final = {"tasks": 1024, "success_rate": 0.9, "mean_score": 0.95}
        if seed == 0:
            final |= {"subset_tasks": 128, "subset_success_rate": 0.5, "subset_mean_score": 0.75}
        store.record_eval(8, "after", "test", final)
        store.set_meta("status", "finished")
        store.close()
    s, _ = summarize(exp.out)
    assert s["static"]["rl_gain"]["seeds"] == pytest.approx({"0": 0.1}) and s["static"]["rl_gain"]["tasks"] == 128
    assert s["static"]["mean_score"]["rl_gain"]["seeds"] == pytest.approx({"0": 0.15})
