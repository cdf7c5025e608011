"""``experiment.html``: the summary's tables and plots on one page, like a run's report.html."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from coevolve_sdk.run import html as page_html
from coevolve_sdk.experiment.plots import make_plots
from coevolve_sdk.experiment.summary import other_metric

__all__ = ["write_page"]


def _num(x: Any) -> str:
    return "–" if x is None else f"{x:.3f}"


def _ci(ci: Any) -> str:
    return "–" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _arms_table(plan: dict[str, Any], stats: dict[str, dict[str, Any]], table_id: str, *, preset: bool) -> str:
    """An HTML table of ``stats`` (arm -> seeds/n/mean/std/ci95/paired_vs_baseline), one row
    per arm and a column per seed; with ``preset``, the arms' presets as a second column."""
    e, baseline = html.escape, plan.get("baseline")
    rows = []
    for arm in plan["arms"]:
        a = stats[arm["name"]]
        p = a.get("paired_vs_baseline")
        paired = "" if not baseline else ("<td>baseline</td><td></td>" if p is None else f"<td>{_num(p['mean'])} (n={p['n']})</td><td>{_ci(p['ci95'])}</td>")
        rows.append(f"<tr><td>{e(arm['name'])}</td>" + (f"<td>{e(arm['preset'] or '–')}</td>" if preset else "")
                    + f"<td>{a['n']}</td><td>{_num(a['mean'])}</td><td>{_num(a['std'])}</td><td>{_ci(a['ci95'])}</td>{paired}"
                    + "".join(f"<td>{_num(a['seeds'].get(str(s)))}</td>" for s in plan["seeds"]) + "</tr>")
    head = ("<tr><th>arm</th>" + ("<th>preset</th>" if preset else "") + "<th>n</th><th>mean</th><th>std</th><th>95% CI</th>"
            + (f"<th>paired diff vs {e(baseline)}</th><th>95% CI of diff</th>" if baseline else "")
            + "".join(f"<th>seed {s}</th>" for s in plan["seeds"]) + "</tr>")
    return f'<table id="{table_id}">{head}{"".join(rows)}</table>'


def write_page(out: Path, summary: dict[str, Any], info: dict[str, Any], plan: dict[str, Any]) -> Path:
    e = html.escape
    plots = make_plots(out, summary, plan)
    other = other_metric(plan["metric"]["key"])
    beside = "" if not other else (f"<p>Beside it, <b>{e(other)}</b> of the same evaluations:</p>"
                                   + _arms_table(plan, {n: a[other] for n, a in summary.items()}, "beside", preset=False))
    arms = "".join(
        f"<li><b>{e(arm['name'])}</b>" + (f" (preset <code>{e(arm['preset'])}</code>: {e(arm['differs'])})" if arm["preset"] else "")
        + (f" — {e(arm['description'])}" if arm["description"] else "")
        + "<ul>" + ("".join(f"<li><code>{e(k)}</code>: {e(str(v['base']))} → {e(str(v['arm']))}</li>" for k, v in arm["changes"].items())
                    or "<li>the base config as it is</li>") + "</ul></li>"
        for arm in plan["arms"]
    )
    use_rows = "".join(
        f"<tr><td>{e(arm['name'])}</td><td>{_num(summary[arm['name']]['mean_admitted_tasks'])}</td>"
        f"<td>{_num(summary[arm['name']]['mean_trained_on_admitted'])}</td>"
        + "".join(f"<td>{summary[arm['name']]['admitted_tasks'].get(str(s), '–')} / {summary[arm['name']]['trained_on_admitted'].get(str(s), '–')}</td>"
                  for s in plan["seeds"]) + "</tr>"
        for arm in plan["arms"])
    use_head = "<tr><th>arm</th><th>mean admitted</th><th>mean trained on</th>" + "".join(f"<th>seed {s}</th>" for s in plan["seeds"]) + "</tr>"
    gain_rows = "".join(
        f"<tr><td>{e(arm['name'])}</td><td>{g['n']}</td><td>{g['tasks']}</td><td>{_num(g['mean'])}</td><td>{_ci(g['ci95'])}</td>"
        + "".join(f"<td>{_num(g['seeds'].get(str(s)))}</td>" for s in plan["seeds"]) + "</tr>"
        for arm in plan["arms"] if (g := summary[arm["name"]].get("rl_gain")))
    gain = "" if not gain_rows else (
        "<h2>During RL</h2><p>Each training run's last evaluation minus its first one after the warm start, on the same tasks "
        f"(<b>{e(plan['metric']['key'])}</b>): what training on the arm's pool added to the warm start.</p>"
        '<table id="rl-gain"><tr><th>arm</th><th>n</th><th>tasks</th><th>mean gain</th><th>95% CI</th>'
        + "".join(f"<th>seed {s}</th>" for s in plan["seeds"]) + f"</tr>{gain_rows}</table>")
    checks = plan["checks"]
    not_finished = [f"{r} ({st})" for r, st in info["runs"].items() if st != "finished"]
    body = f"""<h1>CoEvolve experiment: {e(Path(plan['source']).name)}</h1>
<p>{e(plan.get('description') or '')}</p>
<p>Metric <b>{e(plan['metric']['key'])}</b> on the held-out split <b>{e(plan['split'])}</b> from each run's final evaluation;
seeds {e(', '.join(map(str, plan['seeds'])))}; 95% intervals by Student's t over seeds.
{f"{len(not_finished)} run(s) not finished and left out: {e(', '.join(not_finished))}." if not_finished else "Every run finished."}</p>
<h2>Result</h2>
{_arms_table(plan, summary, "arms", preset=True)}
{beside}
{gain}
<h2>Tasks admitted and trained on</h2>
<p>Per finished run, from its store: tasks evolution admitted / of those, tasks at least one training step sampled.</p>
<table id="tasks">{use_head}{use_rows}</table>
<h2>Fairness checks</h2>
<ul><li>Training compute: {e(checks['compute']['note'])}.</li><li>Teacher budget: {e(checks['teacher_budget']['note'])}.</li>
<li>Environment: {e(checks['environment']['note'])}.</li></ul>
<h2>Plots</h2>{page_html.figures(plots)}
<h2>How the arms differ from the base config</h2><ul>{arms}</ul>
<p>Each run is an ordinary run folder: <code>coevolve report {e(str(out))}/runs/ARM/seed-SEED</code>, <code>coevolve signals ...</code>,
<code>coevolve pool list ...</code>. Numbers: <code>summary.json</code>, <code>summary.csv</code>, <code>summary.md</code>.</p>"""
    page = page_html.page(f"CoEvolve experiment: {Path(plan['source']).name}", body, image_width=900)
    path = out / "experiment.html"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page)
    tmp.replace(path)
    return path
