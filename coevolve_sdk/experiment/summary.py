"""Aggregating an experiment's run folders into ``summary.json``, ``summary.csv``, ``summary.md``.

Everything is read again from the run folders (read-only) and ``OUT/experiment.json``, so a
summary can be made at any time, also while the experiment runs; only finished runs count.
Besides the metric it reports the other score of the same evaluations (mean score beside
success, or success beside mean score: a success rate alone hides partial progress, and a mean
score alone hides whether tasks are finished), with its own intervals and paired differences,
and gathers what explains a difference between arms: held-out success over training, the
signals the teacher was handed per round, the tasks it admitted and what the pool became.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from coevolve_sdk.errors import CoEvolveError
from coevolve_sdk.evolution.rounds import PROBE_COUNTS
from coevolve_sdk.experiment.runs import RunData, read_run
from coevolve_sdk.experiment.stats import describe, paired_difference
from coevolve_sdk.storage.machine import machine_label, machine_part

__all__ = ["summarize", "aggregate", "load_plan", "other_metric"]


def other_metric(key: str) -> str | None:
    """The score reported beside ``key`` (None for a key that is neither of the two)."""
    return {"success_rate": "mean_score", "mean_score": "success_rate"}.get(key)


def load_plan(out: Path) -> dict[str, Any]:
    path = out / "experiment.json"
    if not path.exists():
        raise CoEvolveError(f"{out} is not an experiment folder (no experiment.json). Pass the folder `coevolve experiment` ran in (its --dir).")
    return dict(json.loads(path.read_text()))


def _metric(data: RunData, phase: str, split: str, key: str) -> float | None:
    rows = [e for e in data.evals if e["phase"] == phase and e["split"] == split and isinstance(e.get(key), (int, float))]
    if data.status != "finished" or not rows:
        return None
    value = float(max(rows, key=lambda e: e["step"])[key])
    return value if math.isfinite(value) else None


def _curve(runs: dict[Any, RunData], split: str, key: str) -> dict[str, Any]:
    """The metric on the held-out split at every evaluated step, mean and spread over seeds, and
    each seed's own curve (``seeds``: seed -> steps and values): a mean can hide one seed that
    carries a difference, which the per-seed lines show."""
    by_step: dict[int, list[float]] = defaultdict(list)
    per_seed: dict[str, dict[str, list[Any]]] = {}
    for seed, data in runs.items():
        points: dict[int, float] = {}
        for e in data.evals:  # in the order written: a later row for a step replaces an earlier one
            # with eval.subset, earlier evaluations score the first N tasks and the final one all of
            # them plus its own figure for those N: the curve takes that one, so it follows one set
            k = f"subset_{key}" if isinstance(e.get(f"subset_{key}"), (int, float)) else key
            if e["split"] == split and e["phase"] in ("before", "during", "after") and isinstance(e.get(k), (int, float)):
                points[int(e["step"])] = float(e[k])
        for s, v in points.items():
            by_step[s].append(v)
        per_seed[str(seed)] = {"steps": sorted(points), "values": [points[s] for s in sorted(points)]}
    steps = sorted(by_step)
    stats = [describe(by_step[s]) for s in steps]
    return {"steps": steps, "mean": [d["mean"] for d in stats], "std": [d["std"] for d in stats], "n": [d["n"] for d in stats],
            "seeds": per_seed}


def _rl_gain(runs: dict[Any, RunData], split: str, key: str, metric_phase: str) -> dict[str, Any] | None:
    """What RL itself added to the warm start: per seed, the metric at the run's last evaluation
    minus its first evaluation after the warm start (step 0, phase 'before'), both on the same
    tasks (with eval.subset, the first N: the curve's figures), then mean and 95% CI over seeds.

    The arms' final scores compare arms; this separates the warm start from what followed it,
    at no extra compute (every training run has both evaluations). ``None`` for an arm that does
    not train (its metric is the 'before' evaluation) or has no finished seed with both."""
    if metric_phase != "after":
        return None
    gains: dict[str, float] = {}
    counted: set[Any] = set()
    for seed, data in runs.items():
        first = [e for e in data.evals if e["split"] == split and e["phase"] == "before" and int(e["step"]) == 0]
        last = [e for e in data.evals if e["split"] == split and e["phase"] == "after"]
        if not first or not last:
            continue
        a, b = first[-1], max(last, key=lambda e: e["step"])
        n_first = a.get("tasks")
        # the final evaluation's figure on the tasks the first one scored: its subset figure when
        # it scored more tasks (eval.subset), else its own figure when both scored as many
        k = f"subset_{key}" if b.get("subset_tasks") == n_first and isinstance(b.get(f"subset_{key}"), (int, float)) else key
        if k == key and b.get("tasks") != n_first:
            continue  # not the same tasks: no gain to report
        if isinstance(a.get(key), (int, float)) and isinstance(b.get(k), (int, float)):
            gains[str(seed)] = float(b[k]) - float(a[key])
            counted.add(n_first)
    if not gains:
        return None
    # how many tasks both evaluations scored (one number when every seed evaluated alike)
    tasks = counted.pop() if len(counted) == 1 else sorted(counted)
    return {"seeds": gains, **describe(list(gains.values())), "tasks": tasks}


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _evolution(runs: dict[str, RunData], steps: int) -> dict[str, Any]:
    """Signals, teacher output and pool composition, averaged over the arm's finished seeds."""
    n = len(runs)
    if n == 0:
        return {}
    # a round's numbers are means over the seeds that reached it (a round may happen in one
    # seed only: no signals, no round); rounds_per_run says how many rounds a run had
    per_round: dict[int, dict[str, Any]] = defaultdict(lambda: {"step": [], "signals": defaultdict(float), "admitted": [], "proposed": []})
    detected: dict[str, float] = defaultdict(float)
    pool: dict[str, list[float]] = {}
    for data in runs.values():
        for rd in data.rounds:
            r = per_round[rd["round"]]
            r["step"].append(rd["step"])
            for kind, count in rd["by_kind"].items():
                r["signals"][kind] += count
            r["admitted"].append(rd["accepted"])
            r["proposed"].append(rd["candidates"])
        for _, kind, count in data.signal_counts:
            detected[kind] += count / n
        origins = {o for _, o, _ in data.pool_growth}
        for origin in origins:
            series = pool.setdefault(origin, [0.0] * (steps + 1))
            for s, o, count in data.pool_growth:
                if o == origin:
                    for x in range(min(max(s, 0), steps), steps + 1):
                        series[x] += count / n
    rounds = {
        str(r): {"step": min(v["step"]), "signals": {k: c / len(v["step"]) for k, c in v["signals"].items()},
                 "admitted": _mean(v["admitted"]), "proposed": _mean(v["proposed"]), "seeds": len(v["step"])}
        for r, v in sorted(per_round.items())
    }
    admitted = [a for v in per_round.values() for a in v["admitted"]]
    # evolution.admission_probe: what the agent's tries cost and left out, per run
    probe = {key: sum(rd[key] for d in runs.values() for rd in d.rounds) / n for key in PROBE_COUNTS}
    return {
        "probe_per_run": probe if probe["probed"] else None,
        "rounds": rounds,
        "rounds_per_run": len(admitted) / n,
        "signals_detected": dict(detected),
        "admitted_per_round": _mean(admitted) if admitted else None,
        "pool": {"steps": list(range(steps + 1)), "by_origin": pool},
        "final_pool": {o: v[-1] for o, v in pool.items()},
    }


def aggregate(out: Path, plan: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per arm results (what summary.json holds: only arms at its top level) and the
    experiment-level facts (summary-info.json): metric, checks, each run's status."""
    key, split, baseline = plan["metric"]["key"], plan["split"], plan.get("baseline")
    other = other_metric(key)
    seeds = [str(s) for s in plan["seeds"]]
    summary: dict[str, Any] = {}
    statuses: dict[str, str] = {}
    machines: dict[str, dict[str, Any]] = {}
    commits: dict[str, list[str]] = {}
    for arm in plan["arms"]:
        name = arm["name"]
        runs: dict[str, RunData] = {}
        values: dict[str, float] = {}
        beside: dict[str, float] = {}
        for s in seeds:
            data = read_run(out / "runs" / name / f"seed-{s}")
            statuses[f"{name}/seed-{s}"] = data.status or "not started"
            _add_starts(machines, commits, f"{name}/seed-{s}", data)
            if data.status == "finished":
                runs[s] = data
            v = _metric(data, arm["metric_phase"], split, key)
            if v is not None:
                values[s] = v
            w = _metric(data, arm["metric_phase"], split, other) if other else None
            if w is not None:
                beside[s] = w
        tasks = {"admitted": {s: d.admitted_tasks for s, d in runs.items()},
                 "trained_on": {s: d.trained_on_admitted for s, d in runs.items()},
                 "rejected_eval_requests": {s: d.rejected_eval_requests for s, d in runs.items()},
                 "rounds_short_of_cap": {s: sum(1 for r in d.rounds if r.get("short_of_cap")) for s, d in runs.items()}}
        summary[name] = {
            "seeds": values,
            **describe(list(values.values())),
            # from each finished run's store: what evolution admitted and what training sampled of it
            "admitted_tasks": tasks["admitted"],
            "trained_on_admitted": tasks["trained_on"],
            "mean_admitted_tasks": _mean(list(tasks["admitted"].values())) if runs else None,
            "mean_trained_on_admitted": _mean(list(tasks["trained_on"].values())) if runs else None,
            "rejected_eval_requests": tasks["rejected_eval_requests"],
            "rounds_short_of_cap": tasks["rounds_short_of_cap"],
            "missing": [s for s in seeds if s not in values],
            "preset": arm["preset"], "description": arm["description"], "metric_phase": arm["metric_phase"],
            "curve": _curve(runs, split, key),
            "rl_gain": _rl_gain(runs, split, key, arm["metric_phase"]),
            "evolution": _evolution(runs, int(arm["steps"])),
        }
        if other:  # the same final evaluations' other score, same statistics
            summary[name][other] = {"seeds": beside, **describe(list(beside.values())),
                                    "rl_gain": _rl_gain(runs, split, other, arm["metric_phase"])}
    if baseline is not None:
        for arm in plan["arms"]:
            if arm["name"] != baseline:
                a, b = summary[arm["name"]], summary[baseline]
                a["paired_vs_baseline"] = {"baseline": baseline, **paired_difference(a["seeds"], b["seeds"])}
                if other:
                    a[other]["paired_vs_baseline"] = {"baseline": baseline, **paired_difference(a[other]["seeds"], b[other]["seeds"])}
    # further pairs the experiment file names (an experiment.json written before they existed has none)
    for name, against in plan.get("comparisons") or []:
        a, b = summary[name], summary[against]
        a.setdefault("paired_vs", {})[against] = paired_difference(a["seeds"], b["seeds"])
        if other:
            a[other].setdefault("paired_vs", {})[against] = paired_difference(a[other]["seeds"], b[other]["seeds"])
    info = {
        "metric": plan["metric"], "split": split, "baseline": baseline, "comparisons": plan.get("comparisons") or [],
        "seeds": plan["seeds"], "source": plan["source"],
        "description": plan.get("description", ""), "checks": plan["checks"], "runs": statuses,
        "machines": list(machines.values()),
        "source_commits": commits,
    }
    return summary, info


def _add_starts(machines: dict[str, dict[str, Any]], commits: dict[str, list[str]], run: str, data: RunData) -> None:
    """Group the runs by what their starts ran on and by which code they ran (the git commit of
    the checkout coevolve_sdk was imported from). Every start counts: a run resumed elsewhere is
    listed under both. A run written before starts were recorded is listed as not recorded / "unknown"."""
    if data.status is None:
        return
    for start in data.machines or [{}]:
        what = machine_part(start)
        entry = machines.setdefault(json.dumps(what, sort_keys=True), {
            "label": machine_label(what) if what else "not recorded (a run written before coevolve-sdk recorded machines)",
            "facts": what, "runs": []})
        for runs in (entry["runs"], commits.setdefault(str(start.get("source_commit") or "unknown"), [])):
            if run not in runs:
                runs.append(run)


def _f(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(ci: list[float] | None) -> str:
    return "–" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _csv(summary: dict[str, Any], plan: dict[str, Any]) -> str:
    seeds = [str(s) for s in plan["seeds"]]
    other = other_metric(plan["metric"]["key"])
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["arm", "preset", "phase", "n", "mean", "std", "ci95_lo", "ci95_hi", "baseline", "diff_mean", "diff_ci95_lo", "diff_ci95_hi", "n_paired",
                *[f"seed_{s}" for s in seeds],
                *([f"{other}_{c}" for c in ("mean", "ci95_lo", "ci95_hi", "diff_mean", "diff_ci95_lo", "diff_ci95_hi")] if other else [])])
    for arm in plan["arms"]:
        a = summary[arm["name"]]
        p = a.get("paired_vs_baseline") or {}
        ci, pci = a["ci95"] or [None, None], p.get("ci95") or [None, None]
        extra: list[Any] = []
        if other:
            o = a[other]
            op = o.get("paired_vs_baseline") or {}
            oci, opci = o["ci95"] or [None, None], op.get("ci95") or [None, None]
            extra = [o["mean"], oci[0], oci[1], op.get("mean"), opci[0], opci[1]]
        w.writerow([arm["name"], arm["preset"] or "", a["metric_phase"], a["n"], a["mean"], a["std"], ci[0], ci[1], p.get("baseline", ""),
                    p.get("mean"), pci[0], pci[1], p.get("n", ""), *[a["seeds"].get(s, "") for s in seeds], *extra])
    return buf.getvalue()


def _md_arms(plan: dict[str, Any], stats: dict[str, dict[str, Any]], *, preset: bool) -> list[str]:
    """One Markdown row per arm of ``stats`` (arm -> seeds/n/mean/std/ci95/paired_vs_baseline),
    headed; with ``preset``, the arms' presets as a second column."""
    baseline = plan.get("baseline")
    lines = ["| arm | " + ("preset | " if preset else "") + "n | mean | std | 95% CI | "
             + (f"paired diff vs {baseline} | 95% CI of diff |" if baseline else ""),
             "|---|" + ("---|" if preset else "") + "---|---|---|---|" + ("---|---|" if baseline else "")]
    for arm in plan["arms"]:
        a = stats[arm["name"]]
        row = f"| {arm['name']} |" + (f" {arm['preset'] or '–'} |" if preset else "") + f" {a['n']} | {_f(a['mean'])} | {_f(a['std'])} | {_ci(a['ci95'])} |"
        if baseline:
            p = a.get("paired_vs_baseline")
            row += " (baseline) | |" if p is None else f" {_f(p['mean'], 3)} (n={p['n']}) | {_ci(p['ci95'])} |"
        lines.append(row)
    return lines


def _markdown(summary: dict[str, Any], info: dict[str, Any], plan: dict[str, Any]) -> str:
    lines = [f"# Experiment {Path(plan['source']).name}", ""]
    if plan.get("description"):
        lines += [plan["description"].strip(), ""]
    lines += [
        f"Metric: `{plan['metric']['key']}` on the held-out split `{plan['split']}`, from each run's final evaluation "
        f"('after'; 'before' for an arm that does not train). Seeds: {', '.join(map(str, plan['seeds']))}. "
        f"Intervals: 95%, Student t over seeds.", "",
        *_md_arms(plan, summary, preset=True),
    ]
    other = other_metric(plan["metric"]["key"])
    if other:
        lines += ["", f"Beside it, `{other}` of the same evaluations:", "",
                  *_md_arms(plan, {n: a[other] for n, a in summary.items()}, preset=False)]
    pairs = plan.get("comparisons") or []
    if pairs:
        key = plan["metric"]["key"]
        lines += ["", "Further paired comparisons (arm − against, per seed, over the seeds both have):", "",
                  f"| arm | against | n | {key} diff | 95% CI | " + (f"{other} diff | 95% CI |" if other else ""),
                  "|---|---|---|---|---|" + ("---|---|" if other else "")]
        for name, against in pairs:
            p = summary[name]["paired_vs"][against]
            row = f"| {name} | {against} | {p['n']} | {_f(p['mean'])} | {_ci(p['ci95'])} |"
            if other:
                q = summary[name][other]["paired_vs"][against]
                row += f" {_f(q['mean'])} | {_ci(q['ci95'])} |"
            lines.append(row)
    gained = [a["name"] for a in plan["arms"] if summary[a["name"]].get("rl_gain")]
    if gained:
        key = plan["metric"]["key"]
        lines += ["", "During RL: each training run's last evaluation minus its first one after the warm start (step 0), "
                      "on the same tasks (with `eval.subset`, the first N), mean over seeds: what training on the arm's "
                      "pool added to the warm start.", "",
                  f"| arm | n | tasks | {key} gain | 95% CI | " + (f"{other} gain | 95% CI |" if other else ""),
                  "|---|---|---|---|---|" + ("---|---|" if other else "")]
        for name in gained:
            g = summary[name]["rl_gain"]
            row = f"| {name} | {g['n']} | {g['tasks']} | {_f(g['mean'])} | {_ci(g['ci95'])} |"
            if other:
                h = summary[name][other].get("rl_gain")
                row += f" {_f(h['mean']) if h else '–'} | {_ci(h['ci95']) if h else '–'} |"
            lines.append(row)
    notes = [f"`{n}`: {summary[n]['note']}" for n in (a["name"] for a in plan["arms"]) if summary[n]["note"]]
    if notes:
        lines += ["", "Notes: " + "; ".join(notes) + "."]
    lines += ["", "## Per seed", "", "| arm | " + " | ".join(f"seed {s}" for s in plan["seeds"]) + " |", "|---|" + "---|" * len(plan["seeds"])]
    for arm in plan["arms"]:
        vals = summary[arm["name"]]["seeds"]
        lines.append(f"| {arm['name']} | " + " | ".join(_f(vals.get(str(s))) for s in plan["seeds"]) + " |")
    checks = plan["checks"]
    lines += ["", "## Fairness checks", "",
              f"- Training compute (steps × tasks per step × group size): {checks['compute']['note']}.",
              f"- Teacher budget (random exploration vs signal-guided): {checks['teacher_budget']['note']}.",
              f"- Environment: {checks['environment']['note']}.",
              "", "## How the arms differ from the base config", ""]
    for arm in plan["arms"]:
        lines.append(f"- **{arm['name']}**" + (f" (preset `{arm['preset']}`: {arm['differs']})" if arm["preset"] else "")
                     + (f" — {arm['description'].strip()}" if arm["description"] else ""))
        for k, v in arm["changes"].items():
            lines.append(f"    - `{k}`: {json.dumps(v['base'])} → {json.dumps(v['arm'])}")
        if not arm["changes"]:
            lines.append("    - nothing: the base config as it is")
    lines += ["", "## What evolution did (means over finished seeds)", "",
              "| arm | rounds per run | signals handed to the teacher per round, by kind | admitted per round | signals detected per run, by kind | final pool |",
              "|---|---|---|---|---|---|"]
    for arm in plan["arms"]:
        ev = summary[arm["name"]]["evolution"]
        if not ev:
            lines.append(f"| {arm['name']} | – | – | – | – | – |")
            continue
        rounds = ev["rounds"]
        kinds: dict[str, float] = defaultdict(float)
        held = sum(r["seeds"] for r in rounds.values())
        for r in rounds.values():
            for k, v in r["signals"].items():
                kinds[k] += v * r["seeds"] / held
        lines.append(f"| {arm['name']} | {ev['rounds_per_run']:.1f} | {', '.join(f'{k} {v:.1f}' for k, v in sorted(kinds.items())) or '–'} | "
                     f"{_f(ev['admitted_per_round'], 1)} | {', '.join(f'{k} {v:.1f}' for k, v in sorted(ev['signals_detected'].items())) or '–'} | "
                     f"{', '.join(f'{o} {v:.1f}' for o, v in sorted(ev['final_pool'].items()))} |")
    probed = [(arm["name"], summary[arm["name"]]["evolution"]["probe_per_run"]) for arm in plan["arms"]
              if summary[arm["name"]]["evolution"] and summary[arm["name"]]["evolution"].get("probe_per_run")]
    if probed:
        lines += ["", "Learnability probe at admission (`evolution.admission_probe`), per run: validated tasks the agent tried, "
                      "the rollouts it took (beside training's), and those left out because it solved them in every try or "
                      "in none:", ""]
        lines += [f"- {name}: {p['probed']:.1f} tried, {p['probe_rollouts']:.0f} rollouts; {p['too_easy']:.1f} always solved, "
                  f"{p['too_hard']:.1f} never solved" for name, p in probed]
    lines += ["", "## Tasks admitted and trained on, per seed", "",
              "Counted in each finished run's store: tasks evolution admitted, and of those the tasks at least one training "
              "step sampled (a rollout group); in brackets, candidates rejected for asking an evaluation task's request and "
              "random-exploration rounds that stopped short of the admission cap.", "",
              "| arm | mean admitted | mean trained on | " + " | ".join(f"seed {s}" for s in plan["seeds"]) + " |",
              "|---|---|---|" + "---|" * len(plan["seeds"])]
    for arm in plan["arms"]:
        a = summary[arm["name"]]

        def cell(s: str) -> str:
            if s not in a["admitted_tasks"]:
                return "–"
            extra = [f"{n} {what}" for n, what in ((a["rejected_eval_requests"][s], "evaluation requests rejected"),
                                                  (a["rounds_short_of_cap"][s], "rounds short of the cap")) if n]
            return f"{a['admitted_tasks'][s]} / {a['trained_on_admitted'][s]}" + (f" ({', '.join(extra)})" if extra else "")

        lines.append(f"| {arm['name']} | {_f(a['mean_admitted_tasks'], 1)} | {_f(a['mean_trained_on_admitted'], 1)} | "
                     + " | ".join(cell(str(s)) for s in plan["seeds"]) + " |")
    lines += ["", "## Machines", ""] + _md_machines(info.get("machines") or [])
    commits = info.get("source_commits") or {}
    if commits:
        lines += ["", "Code (the git commit of the checkout coevolve_sdk ran from; 'unknown': an installed package or a run "
                      "that did not record it): " + "; ".join(f"`{c[:12]}` {len(r)} runs" for c, r in commits.items()) + "."]
    missing = [f"{r} ({st})" for r, st in info["runs"].items() if st != "finished"]
    if missing:
        lines += ["", f"## Runs not finished ({len(missing)})", "", ", ".join(missing) + ". They are left out of every number above."]
    lines += ["", "Plots and tables: `experiment.html`. Each run: `coevolve report`, `coevolve signals`, `coevolve pool list` on its "
              "folder under `runs/<arm>/seed-<seed>/`."]
    return "\n".join(lines) + "\n"


def _md_machines(machines: list[dict[str, Any]]) -> list[str]:
    if not machines:
        return ["No run has started yet."]
    if len(machines) == 1:
        m = machines[0]
        return [f"Every run ({len(m['runs'])}) ran on one machine: {m['label']}."]
    return [f"The runs ran on {len(machines)} different machines, package sets or thread counts (`summary-info.json`, "
            "`machines`). A seed repeats its numbers exactly only on the same kind of CPU with the same packages and threads: "
            "the arms stay comparable over many seeds, but a seed's digits are the machine's as much as the seed's.", ""] + [
        f"- {m['label']}: {len(m['runs'])} runs" + (f" ({', '.join(m['runs'][:6])}{', ...' if len(m['runs']) > 6 else ''})") for m in machines]


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def summarize(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write summary.json (arms only), summary-info.json, summary.csv/md, the plots and
    experiment.html for the experiment in ``out``; returns (arms, info)."""
    plan = load_plan(out)
    summary, info = aggregate(out, plan)
    _write(out / "summary.json", json.dumps(summary, indent=2, allow_nan=False))
    _write(out / "summary-info.json", json.dumps(info, indent=2, allow_nan=False))
    _write(out / "summary.csv", _csv(summary, plan))
    _write(out / "summary.md", _markdown(summary, info, plan))
    from coevolve_sdk.experiment.page import write_page

    write_page(out, summary, info, plan)
    return summary, info
