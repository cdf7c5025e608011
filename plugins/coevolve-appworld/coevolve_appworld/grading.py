"""Grading by the world's state: did the agent change the world the way the reference did?

A synthetic task has no hand-written evaluation. Its reference code was executed in a fresh
world of the base task, and what it did was recorded: the rows it added, removed and updated in
each app's tables, and the answer it gave the supervisor (if any). An agent's episode is graded
by recording the same from its own world and comparing:

* added / removed rows of every table must match as multisets, ignoring the row ``id`` (an
  agent that numbered rows differently did the same thing) and bookkeeping time stamps;
* updated rows must match by id and by the fields that changed (ignoring updates that only
  touch bookkeeping fields such as ``last_logged_in``);
* when the reference gave an answer, the agent's answer must match (numbers by value, text
  case-insensitively).

Every requirement is named in the report, like AppWorld's own evaluation; the score is 1 when
all pass and 0 otherwise (task goal completion is binary in AppWorld too).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["GradeReport", "grade_outcome", "answers_match", "goal_completion", "BOOKKEEPING_FIELDS"]

BOOKKEEPING_FIELDS = frozenset({"id", "created_at", "updated_at", "last_logged_in"})


class GradeReport(BaseModel):
    score: float
    passes: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)

    @property
    def success(self) -> bool:
        return not self.failures


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in BOOKKEEPING_FIELDS}, sort_keys=True, default=str)


def _updates(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for u in entries:
        fields = {k: v for k, v in u.get("after", {}).items() if k not in BOOKKEEPING_FIELDS}
        if fields:
            out.append(json.dumps({"id": u.get("id"), "after": fields}, sort_keys=True, default=str))
    return sorted(out)


def _norm_answer(a: Any) -> Any:
    if isinstance(a, bool) or a is None:
        return a
    if isinstance(a, (int, float)):
        return float(a)
    if isinstance(a, str):
        s = a.strip()
        try:
            return float(s)
        except ValueError:
            return s.casefold()
    if isinstance(a, (list, tuple)):
        return [_norm_answer(x) for x in a]
    if isinstance(a, dict):
        return {str(k): _norm_answer(v) for k, v in a.items()}
    return str(a)


def answers_match(expected: Any, actual: Any) -> bool:
    return _norm_answer(expected) == _norm_answer(actual)


def grade_outcome(reference: dict[str, Any], actual: dict[str, Any]) -> GradeReport:
    """Compare two outcomes ``{"changes": {...}, "answer": ...}`` recorded by the worker."""
    ref_changes: dict[str, Any] = reference.get("changes") or {}
    act_changes: dict[str, Any] = actual.get("changes") or {}
    passes: list[str] = []
    failures: list[str] = []
    for table in sorted(set(ref_changes) | set(act_changes)):
        r = ref_changes.get(table, {})
        a = act_changes.get(table, {})
        for kind in ("added", "removed"):
            rk = sorted(_row_key(x) for x in r.get(kind, []))
            ak = sorted(_row_key(x) for x in a.get(kind, []))
            if not rk and not ak:
                continue
            label = f"rows {kind} in {table} match the reference ({len(rk)} expected, {len(ak)} found)"
            (passes if rk == ak else failures).append(label)
        ru, au = _updates(r.get("updated", [])), _updates(a.get("updated", []))
        if ru or au:
            label = f"rows updated in {table} match the reference ({len(ru)} expected, {len(au)} found)"
            (passes if ru == au else failures).append(label)
    if reference.get("answer") is not None:
        label = f"answer matches the reference ({json.dumps(reference.get('answer'), default=str)[:80]})"
        (passes if answers_match(reference.get("answer"), actual.get("answer")) else failures).append(label)
    if not passes and not failures:
        passes.append("no change was expected and none was made")
    return GradeReport(score=0.0 if failures else 1.0, passes=passes, failures=failures)


def goal_completion(results: dict[str, bool]) -> dict[str, float]:
    """AppWorld's two metrics over one split: task goal completion (share of tasks solved) and
    scenario goal completion (share of scenarios, ``<scenario>_<n>`` ids, with all tasks solved)."""
    if not results:
        return {"task_goal_completion": 0.0, "scenario_goal_completion": 0.0, "tasks": 0, "scenarios": 0}
    scenarios: dict[str, list[bool]] = {}
    for task_id, ok in results.items():
        scenarios.setdefault(task_id.rsplit("_", 1)[0], []).append(bool(ok))
    return {
        "task_goal_completion": sum(results.values()) / len(results),
        "scenario_goal_completion": sum(all(v) for v in scenarios.values()) / len(scenarios),
        "tasks": len(results),
        "scenarios": len(scenarios),
    }
