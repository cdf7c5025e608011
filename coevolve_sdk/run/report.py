"""The run report: plots a person would rather look at than read, and the admitted tasks.

``write_report(run_dir)`` reads only the run store (opened read-only, without the run folder's
lock), so it works on a finished run, a running one (from another shell) or a killed one, and
on run folders written before metric names were namespaced (``reward_mean`` then,
``rollout/reward_mean`` now). Plots are SVG files under ``RUN_DIR/report/`` referenced
from ``RUN_DIR/report.html``, drawn by :mod:`coevolve_sdk.run.svg` (nothing to install; a run
folder reported before they were SVG keeps its old PNG files, unlinked).
"""

from __future__ import annotations

import errno
import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from coevolve_sdk.storage.diskspace import DiskFull, disk_full_cause
from coevolve_sdk.run import html as page_html
from coevolve_sdk.run.metrics import metric
from coevolve_sdk.run.svg import Figure
from coevolve_sdk.storage.store import RunStore
from coevolve_sdk.run.trajectories import eval_examples_html

#: the evaluation examples' trajectories (``eval_examples_html``), folded by default
_TRAJECTORY_CSS = """details.trajectory { margin: 0.3em 0; } details.trajectory div { font-family: monospace; white-space: pre-wrap; margin-left: 1em; }
div.call { color: #05a; } div.result.error { color: #a00; } div.outcome { font-weight: bold; }
"""

__all__ = ["write_report", "write_report_safely"]

PHASES = ["time/rollout", "time/update", "time/signals", "time/evolution_wait"]


def _plots(store: RunStore, out: Path) -> dict[str, str]:
    plots = page_html.PlotFolder(out, "report/")
    save = plots.save
    metrics = store.metrics()
    steps = sorted(s for s in metrics if s > 0)

    if steps:
        fig = Figure(630, 315)
        ax = fig.axes("Reward and success per step", "training step", ylim=(-0.02, 1.02))
        ax.line(steps, [metric(metrics[s], "rollout/reward_mean") for s in steps], marker=True, label="mean reward, all tasks")
        ax.line(steps, [metric(metrics[s], "rollout/success_rate") for s in steps], dash="dotted", color="#000000",
                label="success rate, all tasks")
        by_origin: dict[str, dict[int, float]] = defaultdict(dict)
        for s, origin, score, _ in store.score_by_origin():
            by_origin[origin][s] = score
        for origin, series in sorted(by_origin.items()):
            xs = sorted(series)
            ax.line(xs, [series[x] for x in xs], dash="dashed", marker=True, width=1.5, label=f"mean reward, {origin} tasks")
        save(fig, "reward.svg", "Reward and success per step")

        fig = Figure(630, 315)
        ax = fig.axes("Time per phase", "training step", "seconds", legend="upper left")
        bottom = [0.0] * len(steps)
        for ph in PHASES:
            vals = [metrics[s].get(ph, 0.0) for s in steps]
            ax.bars(steps, vals, bottom=bottom, label=ph.split("/")[1])
            bottom = [b + v for b, v in zip(bottom, vals)]
        save(fig, "time.svg", "Time per phase")

    evals = store.evals()
    if evals:
        n_sub = next((e["subset_tasks"] for e in evals if "subset_tasks" in e), None)
        fig = Figure(max(450, 90 * len(evals) + 120), 315)
        ax = fig.axes(f"Evaluation on '{evals[0]['split']}' (greedy" + (f", its first {n_sub} tasks)" if n_sub else ")"),
                      ylim=(0, 1.08), legend="upper left")
        xs = list(range(len(evals)))
        # eval.subset: the final row scored the whole split and its first N tasks too; plot the N
        # so that every bar is on the same tasks (the table below gives the whole split's figures)
        sub = lambda e, k: e.get(f"subset_{k}", e[k])  # noqa: E731
        # the numbers on the bars, so that a zero reads as a result and not as a missing plot
        ax.bars([x - 0.2 for x in xs], [sub(e, "success_rate") for e in evals], width=0.4, label="success rate", values=True)
        ax.bars([x + 0.2 for x in xs], [sub(e, "mean_score") for e in evals], width=0.4, label="mean score", values=True)
        ax.xticks(xs, [f"{e['phase']}\n(step {e['step']})" for e in evals])
        save(fig, "eval.svg", "Evaluation before and after training")

    counts = store.signal_counts()
    if counts:
        kinds = sorted({k for _, k, _ in counts})
        by_step: dict[int, dict[str, int]] = defaultdict(dict)
        for s, k, n in counts:
            by_step[s][k] = n
        xs2 = sorted(by_step)
        fig = Figure(630, 315)
        ax = fig.axes("Signals by kind", "training step (dotted: evolution round)", "signals")
        bottom = [0.0] * len(xs2)
        for k in kinds:
            vals = [float(by_step[s].get(k, 0)) for s in xs2]
            ax.bars(xs2, vals, bottom=bottom, label=k)
            bottom = [b + v for b, v in zip(bottom, vals)]
        for rd in store.rounds():
            ax.vline(rd["step"] + 0.5)
        save(fig, "signals.svg", "Signals per step by kind")

    growth = store.pool_growth()
    if growth:
        last = max(max(steps, default=0), max(s for s, _, _ in growth))
        xs3 = list(range(0, last + 1))
        fig = Figure(630, 315)
        ax = fig.axes("Pool growth: seed vs synthetic", "training step", "tasks in the pool", legend="upper left")
        for origin in sorted({o for _, o, _ in growth}):
            per: dict[int, int] = defaultdict(int)
            for s, o, n in growth:
                if o == origin:
                    per[s] += n
            total, ys = 0, []
            for x in xs3:
                total += per.get(x, 0)
                ys.append(total)
            ax.line(xs3, ys, step=True, label=origin)
        save(fig, "pool.svg", "Pool growth")

    rounds = store.rounds()
    if rounds:
        rs = [r["round"] for r in rounds]
        calls = [r["usage"]["calls"] for r in rounds]
        fig = Figure(630, 315)
        ax1 = fig.axes("Teacher output and usage per round" if any(calls) else "Teacher output per round (no LLM calls: offline teacher)",
                       "evolution round", "tasks", legend="upper left", right_label="teacher LLM calls" if any(calls) else "")
        ax1.bars([r - 0.2 for r in rs], [r["candidates"] for r in rounds], width=0.4, label="proposed")
        ax1.bars([r + 0.2 for r in rs], [r["accepted"] for r in rounds], width=0.4, label="admitted")
        if any(calls):
            ax1.line(rs, calls, color="#000000", marker=True, label="teacher calls", right=True)
        ax1.xticks(rs, [str(r) for r in rs])
        save(fig, "teacher.svg", "Teacher usage per round")
    return plots.made


def _teacher_stages_html(rounds: list[dict[str, Any]]) -> str:
    """What the teacher's model replies did at each stage, from the newest round that recorded
    it (``Teacher.stages()``: the counts are the run's so far), and the first replies of each
    stage as the model wrote them. Empty for a teacher without a model."""
    latest = next((r for r in reversed(rounds) if r.get("teacher_stages")), None)
    if latest is None:
        return ""
    e = html.escape
    stages = latest["teacher_stages"].get("stages") or {}
    replies = latest["teacher_stages"].get("replies") or {}
    keys = list(dict.fromkeys(k for counts in stages.values() for k in counts))
    head = "".join(f"<th>{e(k)}</th>" for k in keys)
    rows = "".join(f"<tr><td>{e(stage)}</td>" + "".join(f"<td>{counts.get(k, '')}</td>" for k in keys) + "</tr>"
                   for stage, counts in stages.items())
    samples = "".join(f"<details class=\"trajectory\"><summary>{e(stage)}: reply {i + 1}</summary><div>{e(text)}</div></details>"
                      for stage, texts in replies.items() for i, text in enumerate(texts))
    return (f"<h2>What the teacher's model said</h2><p>Counts over the run up to round {latest['round']} "
            f"(step {latest['step']}); then the first replies of each stage, as written.</p>"
            f'<table id="teacher-stages"><tr><th>stage</th>{head}</tr>{rows}</table>{samples}')


def write_report(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    store = RunStore(run_dir / "run.sqlite", read_only=True)
    try:
        plots = _plots(store, run_dir / "report")
        evals = store.evals()
        metrics = store.metrics()
        usage = store.usage_rows()
        tasks = [t for t in store.load_tasks(split="train") if t.origin == "synthetic"]
        e = html.escape
        rows = []
        for t in tasks:
            lin = t.lineage
            rows.append(
                "<tr>" + "".join(f"<td>{e(str(x))}</td>" for x in [
                    t.id, lin.step_admitted if lin else "", lin.signal_kind if lin else "", lin.parent_task_id if lin else "",
                    lin.teacher if lin else "", lin.prompt_version if lin else "", len(t.reference_actions), t.query[:160],
                    (lin.validation or {}).get("reason", "") if lin else "",
                ]) + "</tr>"
            )
        eval_rows = "".join(
            f"<tr><td>{e(x['phase'])}</td><td>{x['step']}</td><td>{e(x['split'])}</td><td>{x['tasks']}</td><td>{x['success_rate']:.3f}</td><td>{x['mean_score']:.3f}</td>"
            + (f"<td>{x['subset_success_rate']:.3f} / {x['subset_mean_score']:.3f} on the first {x['subset_tasks']}</td>" if "subset_tasks" in x else "<td></td>")
            + "</tr>"
            for x in evals
        )
        steps_done = [s for s in metrics if s > 0]
        cfg = store.get_meta("config", {}) or {}
        total_calls = sum(u["calls"] for u in usage)
        total_cost = sum(u["cost_usd"] for u in usage)
        replayed_cost = sum(u["cost_usd"] for u in usage if u["rolled_back"])
        replayed_calls = sum(u["calls"] for u in usage if u["rolled_back"])
        replayed = (f" (of which {replayed_calls} calls, ${replayed_cost:.4f}, in attempts rolled back by a resume)"
                    if replayed_calls else "")
        notes = "".join(f"<li><b>step {n['step']}</b>: {e(n['text'])}</li>" for n in store.notes())
        notes_html = f'<h2>Warnings</h2><ul class="warnings">{notes}</ul>' if notes else ""
        revisions = "".join(f"<li>revision {r['revision']} at step {r['step']}{' (forced)' if r['forced'] else ''}: "
                            f"{e('; '.join(r['changes']))}</li>" for r in store.config_revisions())
        revisions_html = f"<h2>Configuration changes on resume</h2><ul>{revisions}</ul>" if revisions else ""
        from coevolve_sdk.storage.machine import machine_label, machine_part

        starts = store.get_meta("machines") or []
        ran_on = sorted({machine_label(machine_part(m)) for m in starts})
        code = sorted({str(m["source_commit"])[:12] for m in starts if m.get("source_commit")})
        ran_on_html = (f"<br>Ran on: {e('; '.join(ran_on))}." if ran_on else "") + (f" Code: commit {e(', '.join(code))}." if code else "")
        body = f"""<h1>CoEvolve run: {e(run_dir.name)}</h1>
<p>Environment <b>{e(str((cfg.get('environment') or {}).get('name', '?')))}</b>, policy <b>{e(str((cfg.get('policy') or {}).get('name', '?')))}</b>,
algorithm <b>{e(str((cfg.get('algorithm') or {}).get('name', '?')))}</b>, teacher <b>{e(str((cfg.get('teacher') or {}).get('name', '?')))}</b>.
Steps done: {len(steps_done)}. Status: {e(str(store.get_meta('status', 'unknown')))}.
Pool: {e(json.dumps(store.task_counts()))}. Teacher: {total_calls} LLM calls, ${total_cost:.4f}{e(replayed)}.{ran_on_html}</p>
{notes_html}
{revisions_html}
<h2>Evaluation</h2>
<table id="evals"><tr><th>phase</th><th>step</th><th>split</th><th>tasks</th><th>success rate</th><th>mean score</th><th>subset (eval.subset): success / score</th></tr>{eval_rows}</table>
{eval_examples_html(store)}
<h2>Plots</h2>{page_html.figures(plots)}
{_teacher_stages_html(store.rounds())}
<h2>Admitted synthetic tasks ({len(tasks)})</h2>
<table id="admitted"><tr><th>id</th><th>step</th><th>signal</th><th>parent</th><th>teacher</th><th>prompt</th><th>actions</th><th>query</th><th>validation</th></tr>
{''.join(rows)}</table>
<p>Full lineage of a task: <code>coevolve pool show {e(str(run_dir))} TASK_ID</code>.</p>"""
        page = page_html.page(f"CoEvolve run report: {run_dir.name}", body, css=_TRAJECTORY_CSS)
        out = run_dir / "report.html"
        tmp = out.with_suffix(".html.tmp")
        tmp.write_text(page)
        tmp.replace(out)
        return out
    finally:
        store.close()


def write_report_safely(run_dir: str | Path, log: Any) -> None:
    """The report at the end of a run: a problem with it is said, and never fails the run."""
    try:
        log(f"report: {write_report(run_dir)}")
    except Exception as e:
        if disk_full_cause(e, run_dir) is not None:  # the one problem that stops the run: everything after needs room too
            raise DiskFull("the report", Path(run_dir) / "report.html", disk_full_cause(e, run_dir) or errno.ENOSPC,
                           f"{type(e).__name__}: {e}") from e
        log(f"could not write the report: {type(e).__name__}: {e}")
