"""One arm of one experiment against one arm of another, paired by seed.

    python examples/experiments/paired.py DIR_A ARM_A DIR_B ARM_B

Prints, for held-out success and mean score, each seed's value in both arms, the per-seed
difference A - B, its mean and 95% interval (the same statistics `coevolve experiment` prints
for the arms of one experiment). Reads only the two folders' summary.json.

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

from coevolve_sdk import paired_difference


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _arm(folder: Path, arm: str) -> dict:
    path = folder / "summary.json"
    if not path.exists():
        _fail(f"{path} does not exist: run `coevolve experiment summarize {folder}` first")
    summary = json.loads(path.read_text())
    if arm not in summary:
        _fail(f"{folder} has no arm {arm!r}; it has: {', '.join(summary)}")
    return summary[arm]


def _machines(folder: Path) -> str:
    info = folder / "summary-info.json"
    if not info.exists():
        return "not recorded"
    machines = json.loads(info.read_text()).get("machines") or []
    return "; ".join(str(m.get("label", m)) if isinstance(m, dict) else str(m) for m in machines) or "not recorded"


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    dir_a, arm_a, dir_b, arm_b = Path(argv[0]), argv[1], Path(argv[2]), argv[3]
    a, b = _arm(dir_a, arm_a), _arm(dir_b, arm_b)
    print(f"A = {dir_a} / {arm_a}   (machines: {_machines(dir_a)})")
    print(f"B = {dir_b} / {arm_b}   (machines: {_machines(dir_b)})")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
