"""Run every benchmark at a size that fits a few minutes and print one table.

Each bench script runs in its own process with ``--json PATH`` (see ``bench/benchlib.py``); its
figures become rows: figure, this project, baseline, ratio, goal, met? The table is printed and
written as JSON (default ``runs/bench/results.json``, with each bench's own output in
``runs/bench/<name>.log``). When the previous results file exists, its ratios are shown beside
the new ones, so a regression shows at a glance. Wall-clock figures on a shared machine are
noisy: read a miss against the load it was measured under (the table prints the load average).

A bench that fails prints its log's tail and makes the exit status 1; a goal missed does not
(timings are not pass/fail).

    python bench/run_all.py [--only a,b] [--skip a,b] [--full] [--out runs/bench/results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from benchlib import BenchResult, Figure, read_json  # noqa: E402


@dataclass
class Bench:
    name: str
    quick: list[str]
    full: list[str] = field(default_factory=list)
    timeout: int = 900
    optional: bool = False  # a script another part of the project may not have written yet


BENCHES = [
    Bench("grpo_vs_trl", ["--steps", "3", "--prompts", "4", "--group", "4", "--tokens", "16"], []),
    Bench("rollout_vs_generate", ["--episodes", "32", "--tokens", "32", "--repeat", "3"], []),
    Bench("turn_cache", ["--episodes", "32", "--repeat", "2"], []),
    Bench("warm_start", ["--steps", "2", "--rounds", "2"], []),
    Bench("signals_throughput", ["--records", "300000", "--no-memory"], []),
    # a round of ~1.3 steps, as in the paper (Table 7: 480 s a round, 376 s a step), admitted async_lag=2 steps later
    Bench("evolution_async", ["--seconds", "0.15", "--steps", "22", "--step-delay", "0.4", "--every", "5", "--async-lag", "2"], []),
    Bench("checkpoint_save", ["--params", "5000000", "--rounds", "2"], []),
    Bench("threads", ["--updates", "40", "--rounds", "1"], []),
    Bench("bfcl_env", ["--entries", "50", "--repeat", "1"], []),
    Bench("scaling", ["--quick"], [], timeout=1800),
    Bench("appworld_concurrency", ["--group", "1", "--repeat", "2", "--setup"], ["--setup"], timeout=1800),
    Bench("main_job", ["--config", "examples/kvstore-tiny.yaml", "--set", "training.steps=4",
                       "--set", "algorithm.options.warm_start.steps=20", "--set", "eval.max_tasks=4"],
          ["--profile"], timeout=3600),
]


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    a = abs(x)
    if a >= 10_000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _supports_json(script: Path) -> bool:
    text = script.read_text()
    return "--json" in text or "add_json_flag" in text


def run_one(b: Bench, out_dir: Path, full: bool) -> tuple[BenchResult | None, str | None, float]:
    """(result, error, seconds)."""
    script = BENCH / f"{b.name}.py"
    if not script.exists():
        return None, "not written yet" if b.optional else f"{script} is missing", 0.0
    if not _supports_json(script):
        return None, f"{script.name} has no --json flag yet (see bench/benchlib.py)", 0.0
    js = out_dir / f"{b.name}.json"
    js.unlink(missing_ok=True)
    log = out_dir / f"{b.name}.log"
    cmd = [sys.executable, str(script), *(b.full if full else b.quick), "--json", str(js)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    try:
        with open(log, "w") as fh:
            proc = subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, timeout=b.timeout, env=env)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = -1
    secs = time.perf_counter() - t0
    if rc != 0 or not js.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        why = "timed out" if rc == -1 else f"exit {rc}" if rc else "wrote no JSON"
        return None, f"{why} after {secs:.0f}s; {log}:\n{tail}", secs
    return read_json(js), None, secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated bench names")
    ap.add_argument("--skip", default="", help="comma-separated bench names")
    ap.add_argument("--full", action="store_true", help="each bench at its own default size (long: the main job alone ~15 min)")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench" / "results.json")
    ap.add_argument("--markdown", type=Path, default=None, metavar="PATH", help="also write the table as Markdown (for the docs)")
    ap.add_argument("--table-only", action="store_true", help="run nothing: print the table of the results file --out")
    args = ap.parse_args()
    only = {x for x in args.only.split(",") if x}
    skip = {x for x in args.skip.split(",") if x}
    unknown = (only | skip) - {b.name for b in BENCHES}
    if unknown:
        ap.error(f"unknown bench name(s) {sorted(unknown)}; known: {', '.join(b.name for b in BENCHES)}")
    if os.environ.get("COEVOLVE_SKIP_APPWORLD") == "1":
        skip.add("appworld_concurrency")
    out_dir = args.out.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    previous: dict[tuple[str, str], float | None] = {}
    previous_rows: list[dict] = []
    previous_time = ""
    previous_load = None
    if args.out.exists():
        try:
            old = json.loads(args.out.read_text())
            previous_time = old.get("time", "")
            previous_load = old.get("load_average")
            for row in old.get("rows", []):
                previous[(row["bench"], row["figure"])] = row.get("ratio")
                previous_rows.append(row)
        except (ValueError, KeyError, TypeError):
            pass

    rows: list[dict] = []
    failed = 0
    for b in BENCHES if not args.table_only else []:
        if (only and b.name not in only) or b.name in skip:
            # not run this time: its rows of the previous file stay in the table, marked as such
            rows += [{**r, "earlier": r.get("earlier") or previous_time} for r in previous_rows if r["bench"] == b.name]
            continue
        print(f"[bench] {b.name} ...", flush=True)
        res, err, secs = run_one(b, out_dir, args.full)
        if res is None or res.skipped:
            why = err or res.skipped  # type: ignore[union-attr]
            if err and not b.optional and "no --json" not in err:
                failed += 1
                print(f"[bench] {b.name} FAILED: {err}", flush=True)
            rows.append({"bench": b.name, "figure": "(not measured)", "note": str(why).splitlines()[0], "met": None})
            continue
        print(f"[bench] {b.name} done in {secs:.0f}s", flush=True)
        for f in res.figures:
            rows.append({"bench": b.name, "figure": f.name, **f.model_dump(exclude={"name"}), "goal_text": f.goal_text(),
                         "previous_ratio": previous.get((b.name, f.name))})

    if args.table_only:
        rows = previous_rows
    headers = ["bench", "figure", "this project", "baseline", "ratio", "prev", "goal", "met?"]
    table = []
    for r in rows:
        if r["figure"] == "(not measured)":
            table.append([r["bench"], r["note"][:70], "", "", "", "", "", "skipped"])
            continue
        f = Figure.model_validate({"name": r["figure"], **{k: r[k] for k in Figure.model_fields if k in r and k != "name"}})
        value = f"{_fmt(f.value)} {f.unit}".strip()
        base = f"{_fmt(f.baseline)}" if f.baseline is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "NO")
        if r.get("earlier"):
            met += " *"
        table.append([r["bench"], f.name, value, base, _fmt(f.ratio) if f.ratio is not None else "",
                      _fmt(r.get("previous_ratio")) if r.get("previous_ratio") is not None else "", f.goal_text(), met])
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print()
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if args.table_only:
        load = previous_load
    goals = [r for r in rows if r.get("met") is not None]
    missed = [r for r in goals if r["met"] is False]
    print()
    if any(r.get("earlier") for r in rows):
        print("* not run this time: figures of an earlier run (" + ", ".join(sorted({r["earlier"] for r in rows if r.get("earlier")})) + ")")
    print(f"{len(goals) - len(missed)} of {len(goals)} goals met; load average {load:.1f} on {os.cpu_count()} cores"
          if load is not None else f"{len(goals) - len(missed)} of {len(goals)} goals met")
    if args.markdown is not None:
        md = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        md += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table]
        args.markdown.write_text("\n".join(md) + "\n")
        print(f"written: {args.markdown}")
    if args.table_only:
        return 0
    args.out.write_text(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": os.cpu_count(), "load_average": load,
                                    "full": args.full, "rows": rows}, indent=2))
    print(f"written: {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
