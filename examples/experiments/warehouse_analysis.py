"""What the signals, the teacher and the pool did in each arm of a warehouse experiment.

    python examples/experiments/warehouse_analysis.py runs/experiments/warehouse [--seeds 2,4] [--markdown]
    python examples/experiments/warehouse_analysis.py DIR --compositions [--seeds 2,4] [--markdown]
    python examples/experiments/warehouse_analysis.py DIR --parents [--seeds 2,4] [--markdown]

Reads every run folder of the experiment (read-only) and prints, per arm (mean over seeds):
signals handed to the teacher per round by kind, tasks proposed and admitted per round, the
skills of the admitted tasks (how many need a count read from the live state: the skills the
held-out split needs and the seed pool under-covers), and how the agent did in training on seed
versus admitted tasks and on tasks with versus without a state skill, and the admitted tasks'
share of the advantage mass (sum of |score - group mean|) beside their share of rollouts, and
the share of groups whose scores are all equal (they teach GRPO nothing) on seed and on
admitted tasks. This
is the "why" next to the summary's "what": are there signals, what did the teacher make of them,
what did the pool become.

``--compositions`` looks at the data itself: for each skill composition (the skills a request
chains, in order, e.g. ``move_all+clear``) its share of the evaluation split, of the seed pool
and of each arm's admitted tasks, each arm's final evaluation success on it (mean over the
seeds named by ``--seeds``, all by default) and its sampled training success on the pool's tasks
of that composition over the whole run (is a weak composition one the agent cannot do, or one it
does in training and not on new instances?), and at the end, for each arm that admitted tasks,
every arm's success on the compositions that make up at least 3% of its admitted tasks and on
the rest, weighted by their share of the split. It answers "what did the admitted tasks add, and
what did the agent lose where they added nothing". The evaluation tasks are rebuilt from the
run's saved environment options (nothing in the run folder is executed).

``--parents`` follows each admitted task to the task its exploration started from (its
lineage's parent: the signalled task for a guided round, a random pool task for random
exploration): per composition of the parent's request, how many admitted tasks came from such
parents, how many of them read as the parent's composition, and how many repeat the parent's
tool calls in order (names only). It answers "when the teacher was handed a task of a weak
composition, did it add more of that composition?"
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from coevolve_warehouse import world

from coevolve_sdk import EVAL_REQUEST_REASON, calls_in

skills_of = world.skills_of  # the skills a request names, read back from its phrases ("?": no phrase)


def has_state_skill(query: str) -> bool:
    return any(s in world.STATE_SKILLS for s in skills_of(query))


def analyse_run(db: Path) -> dict[str, float]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tasks = {tid: (origin, json.loads(data)["query"]) for tid, origin, data in con.execute("SELECT id, origin, data FROM tasks")}
        rounds = [json.loads(d) for (d,) in con.execute("SELECT data FROM rounds ORDER BY round")]
        trajs = con.execute("SELECT step, task_id, success, score FROM trajectories WHERE phase = 'train'").fetchall()
        algo = dict(con.execute("SELECT key, SUM(value) FROM metrics WHERE key IN ('algo/guided_groups', 'algo/groups') GROUP BY key"))
    finally:
        con.close()
    row: dict[str, float] = {"rounds": len(rounds)}
    kinds: Counter[str] = Counter()
    for r in rounds:
        kinds.update(r.get("by_kind") or {})
    for k in ("forgetting", "boundary", "rare", "random"):
        row[f"signals/{k}"] = kinds.get(k, 0) / max(len(rounds), 1)
    row["proposed/round"] = sum(r.get("candidates", 0) for r in rounds) / max(len(rounds), 1)
    row["admitted/round"] = sum(r.get("accepted", 0) for r in rounds) / max(len(rounds), 1)
    # candidates that asked a test request verbatim (rejected by validation, issue 19)
    row["rejected as an evaluation request/round"] = sum((r.get("rejection_reasons") or {}).get(EVAL_REQUEST_REASON, 0)
                                                  for r in rounds) / max(len(rounds), 1)
    seed = [q for o, q in tasks.values() if o == "seed"]
    synth = [q for o, q in tasks.values() if o == "synthetic"]
    row["pool/seed"] = len(seed)
    row["pool/admitted"] = len(synth)
    row["seed: state-skill share"] = sum(map(has_state_skill, seed)) / max(len(seed), 1)
    row["admitted: state-skill share"] = sum(map(has_state_skill, synth)) / max(len(synth), 1) if synth else float("nan")
    by: dict[str, list[int]] = defaultdict(list)
    for _, tid, ok, _ in trajs:
        origin, query = tasks.get(tid, ("?", ""))
        by[f"train success on {'admitted' if origin == 'synthetic' else origin} tasks"].append(ok)
        by[f"train success, {'state' if has_state_skill(query) else 'direct'}-skill tasks"].append(ok)
        by["train rollouts on admitted tasks (share)"].append(origin == "synthetic")
    for k, v in by.items():
        row[k] = sum(v) / len(v)
    # how much of the update the admitted tasks drive: their share of sum |score - group mean| over
    # each step's groups (a group = one task's rollouts in one step), beside their share of rollouts
    groups: dict[tuple[int, str], list[float]] = defaultdict(list)
    for step, tid, _, score in trajs:
        groups[(step, tid)].append(score)
    mass = {True: 0.0, False: 0.0}
    for (_, tid), scores in groups.items():
        mean = sum(scores) / len(scores)
        mass[tasks.get(tid, ("?", ""))[0] == "synthetic"] += sum(abs(x - mean) for x in scores)
    if synth and sum(mass.values()) > 0:
        row["admitted tasks' share of the advantage mass"] = mass[True] / sum(mass.values())
    # GRPO learns only from groups whose scores differ: the share of groups that taught nothing,
    # on seed and on admitted tasks (is what the teacher adds any more informative than D_0?)
    flat: dict[bool, list[bool]] = {True: [], False: []}
    for (_, tid), scores in groups.items():
        flat[tasks.get(tid, ("?", ""))[0] == "synthetic"].append(max(scores) - min(scores) < 1e-12)
    for admitted, name in ((False, "seed"), (True, "admitted")):
        if flat[admitted]:
            row[f"equal-reward groups on {name} tasks (share)"] = sum(flat[admitted]) / len(flat[admitted])
    # algorithm.options.guide_failed_groups: the groups without a success that trained on the reference
    if "algo/guided_groups" in algo and algo.get("algo/groups"):
        row["groups trained on the reference (share)"] = algo["algo/guided_groups"] / algo["algo/groups"]
    return row


def _runs(exp: Path, seeds: set[int] | None) -> list[Path]:
    runs = sorted(exp.glob("runs/*/seed-*/run.sqlite"))
    if seeds is not None:
        runs = [r for r in runs if int(r.parent.name.split("-", 1)[1]) in seeds]
    if not runs:
        raise SystemExit(f"no run folders under {exp}/runs" + (f" for seeds {sorted(seeds)}" if seeds is not None else "")
                         + ": is this an experiment folder?")
    return runs


def analyse(exp: Path, seeds: set[int] | None = None) -> dict[str, dict[str, float]]:
    """arm -> figure -> mean over the arm's finished runs (of the given seeds, all by default)."""
    runs = _runs(exp, seeds)
    per_arm: dict[str, list[dict[str, float]]] = defaultdict(list)
    for db in runs:
        per_arm[db.parent.parent.name].append(analyse_run(db))
    order = json.loads((exp / "experiment.json").read_text()).get("arms") if (exp / "experiment.json").exists() else None
    names = [a["name"] if isinstance(a, dict) else a for a in order] if order else sorted(per_arm)
    out: dict[str, dict[str, float]] = {}
    for arm in [n for n in names if n in per_arm]:
        keys = sorted({k for r in per_arm[arm] for k in r}, key=lambda k: list(per_arm[arm][0]).index(k) if k in per_arm[arm][0] else 99)
        out[arm] = {"runs": len(per_arm[arm])} | {
            k: statistics.fmean([r[k] for r in per_arm[arm] if k in r and r[k] == r[k]] or [float("nan")]) for k in keys
        }
    return out


COVERED = 0.03  # a composition is "covered" by an arm's admitted tasks when at least 3% of them are of it


def composition(query: str) -> str:
    return "+".join(skills_of(query))


def compositions(exp: Path, seeds: set[int] | None = None) -> tuple[list[str], list[dict[str, object]]]:
    """(arms, rows): one row per skill composition of the evaluation split, most frequent first,
    with its share of the split, of the seed pool and of each arm's admitted tasks, and each arm's
    final success on it (mean over the chosen seeds' runs)."""
    import yaml

    from coevolve_warehouse.env import WarehouseEnv

    runs = _runs(exp, seeds)
    cfg = yaml.safe_load((runs[0].parent / "config.yaml").read_text())
    split = (cfg.get("eval") or {}).get("split", "test")
    env = WarehouseEnv(**(cfg["environment"].get("options") or {}))
    eval_kind = {t.id: composition(t.query) for t in env.tasks(split)}
    arms: list[str] = []
    seed_kinds: Counter[str] = Counter()
    admitted: dict[str, Counter[str]] = defaultdict(Counter)
    success: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    trained: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for db in runs:
        arm = db.parent.parent.name
        if arm not in arms:
            arms.append(arm)
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tasks = con.execute("SELECT id, origin, data FROM tasks").fetchall()
            train = con.execute("SELECT task_id, success FROM trajectories WHERE phase = 'train'").fetchall()
            last = con.execute("SELECT MAX(step) FROM trajectories WHERE phase LIKE 'eval%'").fetchone()[0]
            evals = con.execute("SELECT task_id, success FROM trajectories WHERE phase LIKE 'eval%' AND step = ?", (last,)).fetchall()
        finally:
            con.close()
        kind_of = {tid: composition(json.loads(data)["query"]) for tid, _, data in tasks}
        for tid, origin, _ in tasks:
            if origin == "synthetic":
                admitted[arm][kind_of[tid]] += 1
        if db == runs[0]:  # the seed pool is the same in every run of one experiment (same config, same env)
            seed_kinds.update(kind_of[t] for t, o, _ in tasks if o != "synthetic")
        for tid, ok in train:
            trained[arm][kind_of.get(tid, "?")].append(ok)
        for tid, ok in evals:
            success[arm][eval_kind.get(tid, "?")].append(ok)
    n_eval = Counter(eval_kind.values())
    rows: list[dict[str, object]] = []
    for k, n in n_eval.most_common():
        row: dict[str, object] = {"composition": k, "eval share": n / len(eval_kind),
                                  "seed pool share": seed_kinds[k] / max(sum(seed_kinds.values()), 1)}
        for arm in arms:
            if sum(admitted[arm].values()):
                row[f"{arm}: admitted share"] = admitted[arm][k] / sum(admitted[arm].values())
        for arm in arms:
            v = success[arm].get(k, [])
            row[f"{arm}: success"] = sum(v) / len(v) if v else float("nan")
        for arm in arms:  # sampled, on the pool's tasks of this composition (seed and admitted), every step
            v = trained[arm].get(k, [])
            row[f"{arm}: train success"] = sum(v) / len(v) if v else float("nan")
        rows.append(row)
    rest: dict[str, object] = {"composition": "(not in the evaluation split)", "eval share": 0.0,
                               "seed pool share": sum(v for k, v in seed_kinds.items() if k not in n_eval) / max(sum(seed_kinds.values()), 1)}
    for arm in arms:
        if sum(admitted[arm].values()):
            rest[f"{arm}: admitted share"] = sum(v for k, v in admitted[arm].items() if k not in n_eval) / sum(admitted[arm].values())
    rows.append(rest)
    # for each arm that admitted tasks: every arm's success on the compositions making up at least
    # COVERED of its admitted tasks, and on the others, each weighted by its share of the split
    for adm in [a for a in arms if sum(admitted[a].values())]:
        covered = {k for k in n_eval if admitted[adm][k] / sum(admitted[adm].values()) >= COVERED}
        for label, ks in ((f"(covered by {adm}'s admitted tasks)", covered), (f"(not covered by {adm}'s admitted tasks)", set(n_eval) - covered)):
            agg: dict[str, object] = {"composition": label, "eval share": sum(n_eval[k] for k in ks) / len(eval_kind)}
            for arm in arms:
                pairs = [(n_eval[k], sum(success[arm][k]) / len(success[arm][k])) for k in ks if success[arm].get(k)]
                w = sum(n for n, _ in pairs)
                agg[f"{arm}: success"] = sum(n * v for n, v in pairs) / w if w else float("nan")
            rows.append(agg)
    return arms, rows


def parents(exp: Path, seeds: set[int] | None = None) -> tuple[list[str], list[dict[str, object]]]:
    """(arms, rows): one row per composition of the parents of admitted tasks (summed over the
    arms' runs, most frequent first), with per arm the admitted tasks from such parents, those
    whose request reads as the parent's composition and those that repeat the parent's tool
    names in order."""
    runs = _runs(exp, seeds)
    arms: list[str] = []
    children: dict[str, Counter[str]] = defaultdict(Counter)
    same_kind: dict[str, Counter[str]] = defaultdict(Counter)
    same_tools: dict[str, Counter[str]] = defaultdict(Counter)

    def tools(task: dict) -> list[str]:
        return [c.name for a in task.get("reference_actions", []) for c in calls_in(a)]

    for db in runs:
        arm = db.parent.parent.name
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tasks = {tid: json.loads(data) for tid, data in con.execute("SELECT id, data FROM tasks")}
        finally:
            con.close()
        for t in tasks.values():
            parent = tasks.get(((t.get("lineage") or {}).get("parent_task_id")) or "")
            if t.get("origin") != "synthetic" or parent is None:
                continue
            if arm not in arms:
                arms.append(arm)
            k = composition(parent["query"])
            children[arm][k] += 1
            same_kind[arm][k] += composition(t["query"]) == k
            same_tools[arm][k] += tools(t) == tools(parent)
    total: Counter[str] = Counter()
    for arm in arms:
        total.update(children[arm])
    rows: list[dict[str, object]] = []
    for k, _ in total.most_common():
        row: dict[str, object] = {"parent composition": k}
        for arm in arms:
            row[f"{arm}: admitted"] = children[arm][k]
            row[f"{arm}: same composition"] = same_kind[arm][k]
            row[f"{arm}: same tools"] = same_tools[arm][k]
        rows.append(row)
    every: dict[str, object] = {"parent composition": "(all)"}
    for arm in arms:
        every |= {f"{arm}: admitted": sum(children[arm].values()), f"{arm}: same composition": sum(same_kind[arm].values()),
                  f"{arm}: same tools": sum(same_tools[arm].values())}
    rows.append(every)
    return arms, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment_dir", type=Path)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (arms as columns)")
    ap.add_argument("--compositions", action="store_true", help="per skill composition: shares of the evaluation split, "
                    "the seed pool and the admitted tasks, each arm's final success on it and its training success on the pool's tasks of it")
    ap.add_argument("--parents", action="store_true", help="per composition of the task an admitted task was explored from: "
                    "admitted tasks, those of the same composition, those repeating its tool calls")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds to include (default: all)")
    a = ap.parse_args(argv)
    try:
        seeds = {int(x) for x in a.seeds.split(",")} if a.seeds else None
    except ValueError:
        ap.error(f"--seeds takes comma-separated integers such as 2,4, not {a.seeds!r}")
    if a.compositions or a.parents:
        _, rows = (compositions if a.compositions else parents)(a.experiment_dir, seeds)
        cols = list(dict.fromkeys(c for r in rows for c in r))
        digits = 2 if a.markdown else 4  # the tab-separated form is for programs: keep the precision
        cell = lambda v: v if isinstance(v, str) else ("–" if v != v else str(v) if isinstance(v, int) else f"{v:.{digits}f}")  # noqa: E731
        if a.markdown:
            print("| " + " | ".join(cols) + " |")
            print("|---|" + "---:|" * (len(cols) - 1))
            for r in rows:
                print("| " + " | ".join(cell(r.get(c, float("nan"))) for c in cols) + " |")
        else:
            print("\t".join(cols))
            for r in rows:
                print("\t".join(cell(r.get(c, float("nan"))) for c in cols))
        return 0
    table = analyse(a.experiment_dir, seeds)
    arms = list(table)
    figures = list(dict.fromkeys(k for arm in arms for k in table[arm]))
    fmt = lambda v: "–" if v != v else (f"{v:.0f}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.2f}")  # noqa: E731
    if a.markdown:
        print("| figure (mean over seeds) | " + " | ".join(arms) + " |")
        print("|---|" + "---:|" * len(arms))
        for f in figures:
            print(f"| {f} | " + " | ".join(fmt(table[arm].get(f, float("nan"))) for arm in arms) + " |")
    else:
        width = max(map(len, figures))
        print(" " * width + "  " + "  ".join(f"{arm:>18}" for arm in arms))
        for f in figures:
            print(f"{f:<{width}}  " + "  ".join(f"{fmt(table[arm].get(f, float('nan'))):>18}" for arm in arms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
