"""`make demo`'s run (examples/warehouse-tiny.yaml) at a reduced size, run as a user runs it:
held-out evaluations before the warm start, before RL, during and after, and a report."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import REPO, coevolve_cmd

REDUCED = {
    "training.steps": 4, "training.tasks_per_step": 8, "training.checkpoint_every": 2, "evolution.every": 2, "eval.every": 2, "eval.max_tasks": 6,
    "pool.seed_tasks": 48, "algorithm.options.warm_start.steps": 20, "algorithm.options.warm_start.cache": "null",
}


def test_the_demo_evaluates_before_the_warm_start_before_rl_during_and_after(tmp_path: Path) -> None:
    run = tmp_path / "warehouse-tiny"
    sets = [a for k, v in REDUCED.items() for a in ("--set", f"{k}={v}")]
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", OMP_NUM_THREADS="1")
    proc = subprocess.run([*coevolve_cmd(), "run", str(REPO / "examples" / "warehouse-tiny.yaml"), "--set", f"run_dir={run}", *sets],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    con = sqlite3.connect(run / "run.sqlite")
    try:
        evals = con.execute("SELECT phase, step, split FROM evals ORDER BY id").fetchall()
    finally:
        con.close()
    assert evals == [("initial", 0, "test"), ("before", 0, "test"), ("during", 2, "test"), ("after", 4, "test")]
    assert "eval initial:" in proc.stdout and "eval after:" in proc.stdout
    _records_its_machine(run)
    html = (run / "report.html").read_text()
    assert "report/eval.svg" in html and "initial" in html and "Ran on: " in html and "torch kernels" in html
    _compositions_read_the_run(tmp_path, run)


def _records_its_machine(run: Path) -> None:
    """The store says what the run ran on: the same seed gives other numbers under other CPU
    kernels (examples/experiments/kernel_drift.py), so a result without its machine cannot be
    checked."""
    import json

    import torch

    con = sqlite3.connect(run / "run.sqlite")
    try:
        (raw,) = con.execute("SELECT value FROM meta WHERE key = 'machines'").fetchone()
    finally:
        con.close()
    (start,) = json.loads(raw)
    assert start["step"] == 0 and start["cores"] == os.cpu_count()
    assert start["torch_cpu_kernels"] == torch.backends.cpu.get_cpu_capability() and start["torch_threads"] == 1  # OMP_NUM_THREADS=1
    from coevolve_sdk.storage.machine import source_commit

    assert start.get("source_commit") == source_commit()  # None (absent) when the SDK is not a git checkout
    assert start["packages"]["torch"] == torch.__version__ and "coevolve-sdk" in start["packages"] and "coevolve-warehouse" in start["packages"]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        assert start["cpu"] in cpuinfo.read_text()


def _compositions_read_the_run(tmp_path: Path, run: Path) -> None:
    """examples/experiments/warehouse_analysis.py --compositions on this run laid out as a
    one-arm experiment: every request of the evaluation split, the seed pool and the admitted
    tasks is read back to known skills, the shares add up, and a bad --seeds is a usage error."""
    import sys

    exp = tmp_path / "exp"
    (exp / "runs" / "coevolve").mkdir(parents=True)
    (exp / "runs" / "coevolve" / "seed-0").symlink_to(run)
    script = REPO / "examples" / "experiments" / "warehouse_analysis.py"
    out = subprocess.run([sys.executable, str(script), str(exp), "--compositions"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    header, *lines = [line.split("\t") for line in out.stdout.strip().splitlines()]
    assert header[:3] == ["composition", "eval share", "seed pool share"] and "coevolve: success" in header
    assert "coevolve: train success" in header  # sampled training success on the pool's tasks of each composition
    every = [dict(zip(header, line)) for line in lines]
    end = next(i for i, r in enumerate(every) if r["composition"] == "(not in the evaluation split)")
    rows, covered = every[: end + 1], every[end + 1 :]
    assert rows[-1]["composition"] == "(not in the evaluation split)"
    # after it, per arm that admitted tasks: the split in two (covered by its admitted tasks, not)
    assert len(covered) % 2 == 0
    for pair in zip(covered[::2], covered[1::2]):
        assert pair[0]["composition"].startswith("(covered") and pair[1]["composition"].startswith("(not covered")
        assert abs(sum(float(r["eval share"]) for r in pair) - 1) < 1e-3
    assert all("?" not in r["composition"] for r in rows[:-1]), [r["composition"] for r in rows]
    assert abs(sum(float(r["eval share"]) for r in rows) - 1) < 1e-3
    assert abs(sum(float(r["seed pool share"]) for r in rows) - 1) < 1e-3
    scored = [float(r["coevolve: success"]) for r in rows[:-1] if r["coevolve: success"] != "–"]
    assert scored and all(0 <= v <= 1 for v in scored)
    # --parents: per composition of the task each admitted task was explored from, how many kept
    # it. This short run admits nothing, so two admitted tasks with a known parent are added
    # through the SDK's own store: one repeating its parent's request and calls, one another
    # seed task's request and calls (of another composition) on the parent's state
    _parents_counts_what_the_admitted_tasks_kept(tmp_path, script)
    # the default view: per arm, what the signals, the teacher and the pool did, and how many of the
    # step's groups had equal scores (GRPO learns nothing from them) on seed and on admitted tasks
    sys.path.insert(0, str(script.parent))
    try:
        import warehouse_analysis
    finally:
        sys.path.remove(str(script.parent))
    con = sqlite3.connect(run / "run.sqlite")
    try:
        groups = con.execute("SELECT t.origin, MAX(j.score) = MIN(j.score) FROM trajectories j JOIN tasks t ON t.id = j.task_id "
                             "WHERE j.phase = 'train' GROUP BY j.step, j.task_id").fetchall()
        tried = con.execute("SELECT json_extract(t.data, '$.query'), j.success FROM trajectories j JOIN tasks t ON t.id = j.task_id "
                            "WHERE j.phase = 'train'").fetchall()
    finally:
        con.close()
    by_kind: dict[str, list[int]] = {}
    for query, ok in tried:
        by_kind.setdefault(warehouse_analysis.composition(query), []).append(ok)
    checked = [r for r in rows[:-1] if r["coevolve: train success"] != "–"]
    assert checked and all(abs(float(r["coevolve: train success"]) - sum(by_kind[r["composition"]]) / len(by_kind[r["composition"]])) < 1e-3
                           for r in checked)
    row = warehouse_analysis.analyse(exp)["coevolve"]
    seed_flat = [bool(f) for o, f in groups if o == "seed"]
    assert seed_flat and row["equal-reward groups on seed tasks (share)"] == sum(seed_flat) / len(seed_flat)
    for bad, message in (("x", "comma-separated integers"), ("7", "no run folders")):
        err = subprocess.run([sys.executable, str(script), str(exp), "--compositions", "--seeds", bad], capture_output=True, text=True, timeout=300)
        assert err.returncode != 0 and message in err.stderr, err.stderr


def _parents_counts_what_the_admitted_tasks_kept(tmp_path: Path, script: Path) -> None:
    import shutil
    import sys

    from coevolve_sdk import Lineage, RunStore, calls_in
    from coevolve_warehouse.env import WarehouseEnv

    sys.path.insert(0, str(script.parent))
    try:
        import warehouse_analysis
    finally:
        sys.path.remove(str(script.parent))
    exp = tmp_path / "exp-parents"
    run = exp / "runs" / "coevolve" / "seed-0"
    shutil.copytree(tmp_path / "exp" / "runs" / "coevolve" / "seed-0", run, symlinks=False)
    store = RunStore(run / "run.sqlite")
    try:
        seeds = store.load_tasks(split="train")
        kind = {t.id: warehouse_analysis.composition(t.query) for t in seeds}
        tools = lambda t: [c.name for a in t.reference_actions for c in calls_in(a)]  # noqa: E731
        parent = next(t for t in seeds if "+" in kind[t.id])
        other = next(t for t in seeds if kind[t.id] != kind[parent.id] and tools(t) != tools(parent))
        env = WarehouseEnv()
        children = [t.model_copy(update={"id": f"task-child-{i}", "origin": "synthetic", "payload": parent.payload,
                                          "lineage": Lineage(parent_task_id=parent.id, teacher="test", step_admitted=4)})
                    for i, t in enumerate([parent, other])]
        assert env.replay(children[0], children[0].reference_actions).score == 1.0
        store.add_tasks(children, step=4)
    finally:
        store.close()
    out = subprocess.run([sys.executable, str(script), str(exp), "--parents"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    header, *lines = [line.split("\t") for line in out.stdout.strip().splitlines()]
    assert header == ["parent composition", "coevolve: admitted", "coevolve: same composition", "coevolve: same tools"]
    table = {r[0]: [int(x) for x in r[1:]] for r in lines}
    assert table == {kind[parent.id]: [2, 1, 1], "(all)": [2, 1, 1]}
