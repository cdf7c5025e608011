"""The long torture test: 50 SIGKILLs of real `coevolve run`s of the kvstore example, each run
resumed until it finishes, every finished run compared with an uninterrupted one.

tests/core/test_resume_exact.py kills each named point once per evolution mode in CI; this
script draws the kills at random (a named point and which visit of it, or a plain SIGKILL
after a random delay) until it has killed `--kills` times, over as many run folders as that
takes, in both modes. It prints one line per run folder and a summary, and exits 1 if any
resumed run ended differently from the uninterrupted one.

    python bench/kill_resume.py [--kills 50] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.core.test_resume_exact import CONFIG, SETTINGS, _run, _sets, final_state  # noqa: E402

POINTS = ["seed_pool", "warm_start", "eval_before", "step_recorded", "round_started", "after_admission", "eval_during",
          "checkpoint_saved", "checkpoint_commit", "checkpoint_renamed", "eval_after"]


def _env() -> dict[str, str]:
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([repo, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def chain(workdir: Path, mode: str, settings: dict, rng: random.Random, budget: int) -> tuple[list[str], Path]:
    """Kill one run folder until it finishes (or the budget is spent, then let it finish)."""
    run, kills = workdir, []
    env = _env()
    while True:
        spec = None
        if len(kills) < budget:
            spec = "random" if rng.random() < 0.3 else f"{rng.choice(POINTS)}:{rng.randint(1, 3)}"
        fresh = not (run / "config.yaml").exists()  # killed before it wrote its folder: start it again
        args = ["run", str(CONFIG), "--set", f"run_dir={run}", *_sets(settings)] if fresh else ["run", "--resume", str(run)]
        code = _run(args, env, spec, rng)
        if code == 0:
            return kills, run
        kills.append(spec or "?")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    total, mismatches, folders = 0, [], 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        reference = {}
        for mode in ("sync", "async"):
            settings = {**SETTINGS, "evolution.mode": mode}
            assert _run(["run", str(CONFIG), "--set", f"run_dir={root / ('whole-' + mode)}", *_sets(settings)], _env(), None, rng) == 0
            reference[mode] = final_state(root / f"whole-{mode}")
        while total < args.kills:
            mode = "sync" if folders % 2 == 0 else "async"
            settings = {**SETTINGS, "evolution.mode": mode}
            kills, run = chain(root / f"killed-{folders}", mode, settings, rng, budget=min(12, args.kills - total))
            folders += 1
            total += len(kills)
            got = final_state(run)
            differ = [k for k in reference[mode] if got[k] != reference[mode][k]]
            if differ:
                mismatches.append({"folder": run.name, "mode": mode, "kills": kills, "differ": differ})
            if not args.json:
                print(f"{run.name:<10} {mode:<5} {len(kills):>2} kills ({', '.join(kills)}): "
                      f"{'same as uninterrupted' if not differ else 'DIFFERENT: ' + ', '.join(differ)}", flush=True)
    figures = {"kills": total, "run_folders": folders, "mismatches": len(mismatches), "seconds": time.perf_counter() - t0,
               "details": mismatches}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{total} kills over {folders} run folders in {figures['seconds']:.0f}s: "
              f"{folders - len(mismatches)} of {folders} ended exactly like the uninterrupted run")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
