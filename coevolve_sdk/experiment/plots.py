"""The experiment's plots (SVG, drawn by :mod:`coevolve_sdk.run.svg`): the result and why it came about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevolve_sdk.run.html import PlotFolder
from coevolve_sdk.run.svg import COLORS, Figure

__all__ = ["make_plots"]


def make_plots(out: Path, summary: dict[str, Any], plan: dict[str, Any]) -> dict[str, str]:
    """Plot files under ``out/plots/`` by title, paths relative to ``out``."""
    plots = PlotFolder(out / "plots", "plots/")
    save = plots.save
    names = [a["name"] for a in plan["arms"]]
    colors = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    key = plan["metric"]["key"]

    # 1. the final metric per arm: mean with its 95% interval, and every seed as a dot
    fig = Figure(max(585, 100 * len(names) + 180), 340)
    tops = [0.0]
    lows = [0.0]
    for n in names:
        a = summary[n]
        tops.extend(a["seeds"].values())
        lows.extend(a["seeds"].values())
        if a["mean"] is not None and a["ci95"]:
            tops.append(a["ci95"][1])
            lows.append(a["ci95"][0])
    top = max(0.1, 1.15 * max(v for v in tops if v is not None))
    ax = fig.axes("Final metric per arm: mean and 95% CI (dots: seeds)", ylabel=f"{key} ({plan['split']})",
                  ylim=(min(-0.02, min(v for v in lows if v is not None)), top), xlim=(-0.6, len(names) - 0.4))  # zero stays in sight
    for i, n in enumerate(names):
        a = summary[n]
        vals = [v for v in a["seeds"].values() if v is not None]
        ax.points([i] * len(vals), vals, color=colors[n], radius=3.5, opacity=0.45)
        if a["mean"] is not None:
            lo, hi = a["ci95"] or [a["mean"], a["mean"]]
            ax.interval(i, a["mean"], lo, hi, text=f"{a['mean']:.3f}")
    ax.xticks(list(range(len(names))), names, rotate=True)
    save(fig, "final.svg", "Final metric per arm")

    # 2. held-out metric over training, mean ± one standard deviation over seeds
    fig = Figure(630, 340)
    ax = fig.axes("Held-out metric over training (mean ± 1 sd over seeds)", "training step", f"{key} ({plan['split']})")
    drawn = False
    for n in names:
        c = summary[n]["curve"]
        if not c["steps"]:
            continue
        xs, ms = c["steps"], c["mean"]
        sd = [s or 0.0 for s in c["std"]]
        if len(xs) == 1:  # an arm that does not train: a level to beat, drawn across the plot
            ax.hline(ms[0], color=colors[n], label=f"{n} (no training)")
        else:
            ax.band(xs, [m - s for m, s in zip(ms, sd)], [m + s for m, s in zip(ms, sd)], color=colors[n])
            ax.line(xs, ms, marker=True, color=colors[n], label=n)
        drawn = True
    if drawn:
        save(fig, "curves.svg", "Held-out metric over training")

    # 2b. every seed's own curve, one panel per training arm on one scale: whether a difference of
    # the means is every seed's or one seed's
    curved = [n for n in names if len(summary[n]["curve"]["steps"]) > 1 and summary[n]["curve"].get("seeds")]
    if curved:
        values = [v for n in curved for c in summary[n]["curve"]["seeds"].values() for v in c["values"] if v is not None]
        lo, hi = min([0.0, *values]), max([0.1, *values])
        fig = Figure(max(630, 230 * len(curved)), 340)
        for i, n in enumerate(curved):
            c = summary[n]["curve"]
            ax = fig.axes(n, "training step", f"{key} ({plan['split']})" if i == 0 else "", ylim=(lo, hi + 0.05 * (hi - lo)))
            for seed_curve in c["seeds"].values():
                ax.line(seed_curve["steps"], seed_curve["values"], color=colors[n], width=1.0)
            ax.line(c["steps"], c["mean"], color="#000000", width=2.0, label="mean" if i == 0 else None)
        save(fig, "curves-per-seed.svg", "Held-out metric over training, each seed")

    # 3. pool composition over training: tasks per origin, mean over seeds
    trains = {a["name"] for a in plan["arms"] if a["trains"]}  # an arm that does not train has no pool over time
    pools = {n: summary[n]["evolution"].get("pool") for n in names if summary[n]["evolution"] and n in trains}
    if pools:
        fig = Figure(630, 340)
        ax = fig.axes("Pool composition over training (mean over seeds)", "training step", "tasks in the pool", legend="upper left")
        for n, pool in pools.items():
            by_origin = pool["by_origin"]
            total = [sum(v[i] for v in by_origin.values()) for i in range(len(pool["steps"]))]
            ax.line(pool["steps"], total, step=True, color=colors[n], label=f"{n}: all tasks")
            if "synthetic" in by_origin:
                ax.line(pool["steps"], by_origin["synthetic"], step=True, color=colors[n], width=1.2, dash="dotted", label=f"{n}: synthetic")
        save(fig, "pool.svg", "Pool composition per arm")

    # 4. what evolution did per round: signals handed to the teacher by kind, and tasks admitted
    evolving = [n for n in names if summary[n]["evolution"].get("rounds")]
    if evolving:
        fig = Figure(900, 340)
        ax1 = fig.axes("Signals handed to the teacher, by kind", ylabel="signals per round (mean)")
        ax2 = fig.axes("Tasks proposed and admitted per round", "evolution round", "tasks (mean over seeds)", integer_x=True)
        kinds = sorted({k for n in evolving for r in summary[n]["evolution"]["rounds"].values() for k in r["signals"]})
        width = 0.8 / max(1, len(evolving))
        for j, n in enumerate(evolving):
            rounds = summary[n]["evolution"]["rounds"]
            held = sum(r["seeds"] for r in rounds.values())  # a round's mean counts once per seed that had it
            per_kind = [sum(r["signals"].get(k, 0.0) * r["seeds"] for r in rounds.values()) / held for k in kinds]
            ax1.bars([i + j * width for i in range(len(kinds))], per_kind, width=width, color=colors[n], label=n)
            xs = [int(r) for r in rounds]
            ax2.line(xs, [rounds[r]["admitted"] for r in rounds], marker=True, color=colors[n], label=f"{n} admitted")
            ax2.line(xs, [rounds[r]["proposed"] for r in rounds], dash="dotted", color=colors[n], label=f"{n} proposed")
        ax1.xticks([i + width * (len(evolving) - 1) / 2 for i in range(len(kinds))], kinds)
        save(fig, "evolution.svg", "Signals and admitted tasks per round")
    return plots.made
