"""One arm of one experiment against one arm of another, paired by seed.

    python examples/experiments/paired.py DIR_A ARM_A DIR_B ARM_B [--effect POINTS]

Prints, for held-out success and mean score, each seed's value in both arms, the per-seed
difference A - B, its mean and 95% interval (the same statistics `coevolve experiment` prints
for the arms of one experiment). Reads only the folders' summary.json.

DIR_A (or DIR_B) may name several experiment folders joined by commas: their seeds are taken
together (an experiment repeated on new seeds in a folder of its own is read with the first);
a seed that two of them hold is an error. ``--effect 1.5`` adds how many seeds a new experiment
would need for 80% power to find a true difference of 1.5 points (95% interval above zero),
given the spread of the per-seed differences printed (``seeds_for_power``).

What it is for: a development check that changes one setting for every arm (a new experiment
file) is read against the same arms of the experiment it varies, seed by seed. Such a pairing
holds only when both ran the same seeds on the same kind of machine (the summaries' machines
say which: docs/evidence.md, "Check it yourself"); the script prints both experiments'
machines so that the reader can see it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from coevolve_sdk import paired_difference, seeds_for_power


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _arm(folders: list[Path], arm: str) -> dict:
    """The arm's per-seed success and mean score, merged over ``folders``."""
    merged: dict = {"seeds": {}, "mean_score": {"seeds": {}}}
    owner: dict[str, Path] = {}
    for folder in folders:
        path = folder / "summary.json"
        if not path.exists():
            _fail(f"{path} does not exist: run `coevolve experiment summarize {folder}` first")
        summary = json.loads(path.read_text())
        if arm not in summary:
            _fail(f"{folder} has no arm {arm!r}; it has: {', '.join(summary)}")
        for seed, value in (summary[arm].get("seeds") or {}).items():
            if seed in owner:
                _fail(f"seed {seed} of arm {arm!r} is in both {owner[seed]} and {folder}: join only experiments on different seeds")
            owner[seed] = folder
            merged["seeds"][seed] = value
        merged["mean_score"]["seeds"].update((summary[arm].get("mean_score") or {}).get("seeds") or {})
    return merged


def _folders(arg: str) -> list[Path]:
    return [Path(p) for p in arg.split(",") if p]


def _machines(folders: list[Path]) -> str:
    labels: list[str] = []
    for folder in folders:
        info = folder / "summary-info.json"
        machines = (json.loads(info.read_text()).get("machines") or []) if info.exists() else []
        for m in machines:
            label = str(m.get("label", m)) if isinstance(m, dict) else str(m)
            if label not in labels:
                labels.append(label)
    return "; ".join(labels) or "not recorded"


def main(argv: list[str]) -> int:
    args = list(argv)
    effect = None
    if "--effect" in args:
        i = args.index("--effect")
        try:
            effect = float(args[i + 1])
        except (IndexError, ValueError):
            _fail("--effect needs a number of points, e.g. --effect 1.5")
        if effect <= 0:
            _fail(f"--effect must be above zero (points of a difference), not {args[i + 1]}")
        del args[i : i + 2]
    if len(args) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    dirs_a, arm_a, dirs_b, arm_b = _folders(args[0]), args[1], _folders(args[2]), args[3]
    a, b = _arm(dirs_a, arm_a), _arm(dirs_b, arm_b)
    print(f"A = {args[0]} / {arm_a}   (machines: {_machines(dirs_a)})")
    print(f"B = {args[2]} / {arm_b}   (machines: {_machines(dirs_b)})")
    for label, key in (("held-out success", None), ("mean score", "mean_score")):
        sa = (a if key is None else a.get(key) or {}).get("seeds") or {}
        sb = (b if key is None else b.get(key) or {}).get("seeds") or {}
        diff = paired_difference(sa, sb)
        print(f"\n{label}")
        for seed in sorted(diff["seeds"], key=int):
            print(f"  seed {seed}: A {sa[seed]:.3f}  B {sb[seed]:.3f}  A - B {diff['seeds'][seed]:+.3f}")
        ci = diff.get("ci95")
        interval = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else f"({diff.get('note')})"
        print(f"  A - B over {diff['n']} seeds: {diff['mean']:+.3f} {interval}")
        if effect is not None and diff.get("std") is not None:
            n = seeds_for_power(diff["std"] * 100, effect)
            need = f"{n} seeds" if n is not None else "more than 10,000 seeds"
            print(f"  SD of A - B {diff['std'] * 100:.1f} points: {need} for 80% power at a true difference of {effect:g} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
