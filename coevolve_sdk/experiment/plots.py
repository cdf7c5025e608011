"""The experiment's plots (PNG, matplotlib's Agg backend): the result and why it came about.

matplotlib is optional (``coevolve-sdk[report]``); without it ``make_plots`` raises
ImportError and the page says how to get the plots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevolve_sdk.run.html import PlotFolder

__all__ = ["make_plots"]


def make_plots(out: Path, summary: dict[str, Any], plan: dict[str, Any]) -> dict[str, str]:
    """Plot files under ``out/plots/`` by title, paths relative to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = PlotFolder(out / "plots", "plots/")
    save = plots.save
    names = [a["name"] for a in plan["arms"]]
    colors = {n: f"C{i % 10}" for i, n in enumerate(names)}
    key = plan["metric"]["key"]

    # 1. the final metric per arm: mean with its 95% interval, and every seed as a dot
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(names) + 2), 3.8))
    tops = [0.0]
    for i, n in enumerate(names):
        a = summary[n]
        vals = list(a["seeds"].values())
        ax.scatter([i] * len(vals), vals, color=colors[n], alpha=0.45, s=18, zorder=3)
        tops.extend(vals)
        if a["mean"] is not None:
            lo, hi = a["ci95"] or [a["mean"], a["mean"]]
            tops.append(hi)
            ax.errorbar([i], [a["mean"]], yerr=[[a["mean"] - lo], [hi - a["mean"]]], fmt="o", color="black", capsize=6, ms=7, zorder=4)
            ax.annotate(f"{a['mean']:.3f}", (i, a["mean"]), textcoords="offset points", xytext=(10, -3), fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel(f"{key} ({plan['split']})")
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylim(bottom=min(-0.02, ax.get_ylim()[0]), top=max(0.1, 1.15 * max(tops)))  # zero stays in sight
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Final metric per arm: mean and 95% CI (dots: seeds)", fontsize=10)
    save(fig, "final.png", "Final metric per arm")

    # 2. held-out metric over training, mean ± one standard deviation over seeds
    fig, ax = plt.subplots(figsize=(7, 3.8))
    drawn = False
    for n in names:
        c = summary[n]["curve"]
        if not c["steps"]:
            continue
        xs, ms = c["steps"], c["mean"]
        sd = [s or 0.0 for s in c["std"]]
        if len(xs) == 1:  # an arm that does not train: a level to beat, drawn across the plot
            ax.axhline(ms[0], color=colors[n], ls="--", lw=1.5, label=f"{n} (no training)")
        else:
            ax.plot(xs, ms, marker="o", ms=3, color=colors[n], lw=2, label=n)
            ax.fill_between(xs, [m - s for m, s in zip(ms, sd)], [m + s for m, s in zip(ms, sd)], color=colors[n], alpha=0.15)
        drawn = True
    if drawn:
        ax.set_xlabel("training step")
        ax.set_ylabel(f"{key} ({plan['split']})")
        ax.legend(fontsize=8, framealpha=0.8)
        ax.grid(alpha=0.3)
        ax.set_title("Held-out metric over training (mean ± 1 sd over seeds)")
        save(fig, "curves.png", "Held-out metric over training")
    else:
        plt.close(fig)

    # 3. pool composition over training: tasks per origin, mean over seeds
    trains = {a["name"] for a in plan["arms"] if a["trains"]}  # an arm that does not train has no pool over time
    pools = {n: summary[n]["evolution"].get("pool") for n in names if summary[n]["evolution"] and n in trains}
    if pools:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for n, pool in pools.items():
            by_origin = pool["by_origin"]
            total = [sum(v[i] for v in by_origin.values()) for i in range(len(pool["steps"]))]
            ax.step(pool["steps"], total, where="post", color=colors[n], lw=2, label=f"{n}: all tasks")
            if "synthetic" in by_origin:
                ax.step(pool["steps"], by_origin["synthetic"], where="post", color=colors[n], lw=1.2, ls=":", label=f"{n}: synthetic")
        ax.set_xlabel("training step")
        ax.set_ylabel("tasks in the pool")
        ax.legend(fontsize=7, framealpha=0.8, ncol=2)
        ax.grid(alpha=0.3)
        ax.set_title("Pool composition over training (mean over seeds)")
        save(fig, "pool.png", "Pool composition per arm")

    # 4. what evolution did per round: signals handed to the teacher by kind, and tasks admitted
    evolving = [n for n in names if summary[n]["evolution"].get("rounds")]
    if evolving:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
        kinds = sorted({k for n in evolving for r in summary[n]["evolution"]["rounds"].values() for k in r["signals"]})
        width = 0.8 / max(1, len(evolving))
        for j, n in enumerate(evolving):
            rounds = summary[n]["evolution"]["rounds"]
            held = sum(r["seeds"] for r in rounds.values())  # a round's mean counts once per seed that had it
            per_kind = [sum(r["signals"].get(k, 0.0) * r["seeds"] for r in rounds.values()) / held for k in kinds]
            ax1.bar([i + j * width for i in range(len(kinds))], per_kind, width=width, color=colors[n], label=n)
            xs = [int(r) for r in rounds]
            ax2.plot(xs, [rounds[r]["admitted"] for r in rounds], marker="o", color=colors[n], label=f"{n} admitted")
            ax2.plot(xs, [rounds[r]["proposed"] for r in rounds], ls=":", color=colors[n], label=f"{n} proposed")
        ax1.set_xticks([i + width * (len(evolving) - 1) / 2 for i in range(len(kinds))], kinds)
        ax1.set_ylabel("signals per round (mean)")
        ax1.set_title("Signals handed to the teacher, by kind")
        ax1.legend(fontsize=8)
        ax2.xaxis.get_major_locator().set_params(integer=True)
        ax2.set_xlabel("evolution round")
        ax2.set_ylabel("tasks (mean over seeds)")
        ax2.set_title("Tasks proposed and admitted per round")
        ax2.legend(fontsize=7, ncol=2)
        ax2.grid(alpha=0.3)
        save(fig, "evolution.png", "Signals and admitted tasks per round")
    return plots.made
