"""What a benchmark hands to ``bench/run_all.py``: its figures, each with baseline, ratio and goal.

Every script in ``bench/`` prints prose for a person and, given ``--json PATH``, also writes
its figures there, so that the one table of ``make bench`` is built from numbers and never
parsed from text. The file is ``BenchResult`` as JSON::

    {"bench": "rollout_vs_generate", "params": {...},
     "figures": [{"name": "rollout loop vs raw generate", "value": 4012.0, "unit": "tok/s",
                  "baseline": 4100.0, "baseline_label": "model.generate", "ratio": 0.98,
                  "goal_on": "ratio", "goal_op": ">=", "goal": 0.8, "met": true}]}

A figure's goal applies to its ratio (``goal_on="ratio"``: this project against a baseline
measured in the same run) or to its value (``goal_on="value"``: e.g. a share of wall time).
``met`` is None when a figure has no goal (printed for information). Wall-clock figures on a
shared machine are noisy: benches report best-of-N and interleave the two sides.

A bench script adds the flag with ``add_json_flag(parser)`` and ends with
``write_json(args.json, bench, figures, params)``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

__all__ = ["Figure", "BenchResult", "add_json_flag", "write_json"]


class Figure(BaseModel):
    """One number of a benchmark, with what it is compared against."""

    name: str
    value: float | None
    unit: str = ""
    baseline: float | None = None
    baseline_label: str = ""
    ratio: float | None = Field(None, description="value / baseline unless the bench says otherwise (e.g. a speed-up)")
    goal_on: Literal["ratio", "value"] = "ratio"
    goal_op: Literal[">=", "<="] | None = None
    goal: float | None = None
    met: bool | None = None
    note: str = ""

    @model_validator(mode="after")
    def _derive(self) -> "Figure":
        if self.ratio is None and self.value is not None and self.baseline:
            self.ratio = self.value / self.baseline
        if self.met is None and self.goal is not None and self.goal_op is not None:
            x = self.ratio if self.goal_on == "ratio" else self.value
            if x is not None:
                self.met = x >= self.goal if self.goal_op == ">=" else x <= self.goal
        return self

    def goal_text(self) -> str:
        if self.goal is None or self.goal_op is None:
            return ""
        what = "ratio" if self.goal_on == "ratio" else "value"
        return f"{what} {self.goal_op} {self.goal:g}"


class BenchResult(BaseModel):
    bench: str
    params: dict[str, Any] = Field(default_factory=dict)
    figures: list[Figure] = Field(default_factory=list)
    skipped: str | None = Field(None, description="why the bench did not measure (a missing optional part)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the figures as JSON to PATH (read by bench/run_all.py)")


def write_json(path: Path | None, bench: str, figures: list[Figure], params: dict[str, Any] | None = None,
               skipped: str | None = None) -> None:
    if path is None:
        return
    result = BenchResult(bench=bench, params=params or {}, figures=figures, skipped=skipped)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(result.model_dump_json(indent=2))


def read_json(path: Path) -> BenchResult:
    return BenchResult.model_validate(json.loads(Path(path).read_text()))
