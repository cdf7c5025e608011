"""Rewrite tests/durations.json from per-test timings recorded with COEVOLVE_TEST_TIMES.

    COEVOLVE_TEST_TIMES=/tmp/times.jsonl .venv/bin/python -m pytest tests/...
    .venv/bin/python scripts/test_durations.py /tmp/times.jsonl [more.jsonl ...]

The table only orders the tests of a parallel run (the most expensive first, see tests/conftest.py);
it never selects or skips any. CPU seconds (the test process and the child processes it waited
for) are used rather than wall seconds, because they hardly change with the machine's load. Every
measured test gets a row, cheap ones too: a test without one is estimated from its `slow` mark.
Rows of tests that were not measured this time are kept, so measuring one folder updates only that
folder's rows (delete the file first to start from a clean table).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    measured: dict[str, float] = {}
    for p in paths:
        for line in Path(p).read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                measured[rec["id"]] = max(measured.get(rec["id"], 0.0), float(rec["cpu"]))
    table: dict[str, float] = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    for test_id, cpu in measured.items():
        table[test_id] = round(cpu, 1)
    TABLE.write_text(json.dumps(dict(sorted(table.items())), indent=0) + "\n")
    print(f"{TABLE}: {len(table)} tests, {sum(table.values()) / 60:.1f} CPU minutes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
