"""Rewrite tests/durations.json from per-test timings recorded with COEVOLVE_TEST_TIMES.

    COEVOLVE_TEST_TIMES=/tmp/times.jsonl .venv/bin/python -m pytest tests/...
    .venv/bin/python scripts/test_durations.py /tmp/times.jsonl [more.jsonl ...]

The table only orders the tests of a parallel run (the most expensive first, see tests/conftest.py);
it never selects or skips any. CPU seconds (the test process and the child processes it waited
for) are used rather than wall seconds, because they hardly change with the machine's load. Tests
under MIN_SECONDS are left out (they are estimated at 1 s). Entries of tests that were not measured
this time are kept, so measuring one folder updates only that folder's rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "tests" / "durations.json"
MIN_SECONDS = 2.0


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
        if cpu >= MIN_SECONDS:
            table[test_id] = round(cpu, 1)
        else:
            table.pop(test_id, None)
    TABLE.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
    print(f"{TABLE}: {len(table)} tests of {MIN_SECONDS:g} s or more")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
