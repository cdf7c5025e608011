"""RunStore: one SQLite file per run holding everything worth keeping about it.

WAL mode and one transaction per write batch: a crash or SIGKILL at any point leaves the file
at the last committed batch. Tasks are written the moment they are admitted and never deleted;
step records (trajectories, signals, metrics) after the last checkpoint are dropped on resume
because those steps are re-run.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .types import CandidateTask, Signal, Task, TeacherUsage, Trajectory, Verdict

__all__ = ["RunStore"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    env TEXT NOT NULL,
    origin TEXT NOT NULL,
    split TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    step_admitted INTEGER,
    created REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_split ON tasks(split);
CREATE TABLE IF NOT EXISTS trajectories (
    id TEXT PRIMARY KEY, step INTEGER NOT NULL, task_id TEXT NOT NULL, score REAL NOT NULL,
    success INTEGER NOT NULL, phase TEXT NOT NULL DEFAULT 'train', data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS traj_step ON trajectories(step);
CREATE TABLE IF NOT EXISTS history (task_id TEXT NOT NULL, step INTEGER NOT NULL, score REAL NOT NULL, trajectory_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS history_task ON history(task_id);
CREATE TABLE IF NOT EXISTS signals (
    id TEXT PRIMARY KEY, step INTEGER NOT NULL, round INTEGER, kind TEXT NOT NULL, task_id TEXT NOT NULL,
    trajectory_id TEXT NOT NULL, data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS signals_step ON signals(step);
CREATE TABLE IF NOT EXISTS metrics (step INTEGER NOT NULL, key TEXT NOT NULL, value REAL NOT NULL, PRIMARY KEY (step, key));
CREATE TABLE IF NOT EXISTS verdicts (
    candidate_id TEXT PRIMARY KEY, step INTEGER NOT NULL, round INTEGER, signal_id TEXT, accepted INTEGER NOT NULL,
    reason TEXT NOT NULL, task_id TEXT, candidate TEXT NOT NULL, verdict TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS teacher_usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT, step INTEGER NOT NULL, round INTEGER, signal_id TEXT, task_ids TEXT NOT NULL,
    calls INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    failures INTEGER NOT NULL, seconds REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS evals (
    id INTEGER PRIMARY KEY AUTOINCREMENT, step INTEGER NOT NULL, phase TEXT NOT NULL, split TEXT NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY, step INTEGER NOT NULL, data TEXT NOT NULL
);
"""


class RunStore:
    """Thread-safe access to the run's SQLite file (one connection, one lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._tx() as c:
            c.executescript(_SCHEMA)
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN")
            except sqlite3.OperationalError:
                pass  # executescript manages its own transaction
            try:
                yield self._db
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    # ---------------------------------------------------------------- meta
    def set_meta(self, key: str, value: Any) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default

    # ---------------------------------------------------------------- tasks
    def add_tasks(self, tasks: list[Task], step: int | None = None) -> None:
        now = time.time()
        with self._tx() as c:
            for t in tasks:
                admitted = t.lineage.step_admitted if t.lineage and t.lineage.step_admitted is not None else step
                c.execute(
                    "INSERT OR IGNORE INTO tasks(id, env, origin, split, fingerprint, step_admitted, created, data) VALUES (?,?,?,?,?,?,?,?)",
                    (t.id, t.env, t.origin, t.split, t.fingerprint(), admitted, now, t.model_dump_json()),
                )

    def load_tasks(self, split: str | None = None, origin: str | None = None) -> list[Task]:
        sql, args = "SELECT data FROM tasks", []
        conds = []
        if split is not None:
            conds.append("split = ?")
            args.append(split)
        if origin is not None:
            conds.append("origin = ?")
            args.append(origin)
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        sql += " ORDER BY seq"
        return [Task.model_validate_json(r[0]) for r in self._query(sql, tuple(args))]

    def get_task(self, task_id: str) -> Task | None:
        rows = self._query("SELECT data FROM tasks WHERE id = ?", (task_id,))
        return Task.model_validate_json(rows[0][0]) if rows else None

    def find_tasks(self, prefix: str) -> list[Task]:
        rows = self._query("SELECT data FROM tasks WHERE id LIKE ? ORDER BY seq", (prefix.replace("%", "") + "%",))
        return [Task.model_validate_json(r[0]) for r in rows]

    def task_counts(self) -> dict[str, int]:
        return {o: n for o, n in self._query("SELECT origin, COUNT(*) FROM tasks WHERE split = 'train' GROUP BY origin")}

    def pool_growth(self) -> list[tuple[int, str, int]]:
        """(step admitted, origin, count) rows for the report's pool-growth plot."""
        return [(int(s if s is not None else 0), o, int(n)) for s, o, n in self._query(
            "SELECT step_admitted, origin, COUNT(*) FROM tasks WHERE split = 'train' GROUP BY step_admitted, origin ORDER BY step_admitted")]

    # ---------------------------------------------------------------- step records
    def record_step(self, step: int, trajectories: list[Trajectory], signals: list[Signal], metrics: dict[str, float]) -> None:
        """All of one step's records in one transaction: either the whole step is there or none of it."""
        with self._tx() as c:
            for t in trajectories:
                c.execute(
                    "INSERT OR REPLACE INTO trajectories(id, step, task_id, score, success, phase, data) VALUES (?,?,?,?,?,?,?)",
                    (t.id, step, t.task_id, t.score, int(t.success), "train", t.without_tokens().model_dump_json()),
                )
                c.execute("INSERT INTO history(task_id, step, score, trajectory_id) VALUES (?,?,?,?)", (t.task_id, step, t.score, t.id))
            for s in signals:
                c.execute(
                    "INSERT OR REPLACE INTO signals(id, step, round, kind, task_id, trajectory_id, data) VALUES (?,?,?,?,?,?,?)",
                    (s.id, step, None, s.kind, s.task_id, s.trajectory_id, s.model_dump_json()),
                )
            for k, v in metrics.items():
                c.execute("INSERT OR REPLACE INTO metrics(step, key, value) VALUES (?,?,?)", (step, k, float(v)))

    def add_metrics(self, step: int, metrics: dict[str, float]) -> None:
        with self._tx() as c:
            for k, v in metrics.items():
                c.execute("INSERT OR REPLACE INTO metrics(step, key, value) VALUES (?,?,?)", (step, k, float(v)))

    def add_trajectories(self, trajectories: list[Trajectory], step: int, phase: str) -> None:
        with self._tx() as c:
            for t in trajectories:
                c.execute(
                    "INSERT OR REPLACE INTO trajectories(id, step, task_id, score, success, phase, data) VALUES (?,?,?,?,?,?,?)",
                    (t.id, step, t.task_id, t.score, int(t.success), phase, t.without_tokens().model_dump_json()),
                )

    def truncate_after(self, step: int, after_round: int | None = None) -> None:
        """Drop step records newer than ``step`` (those steps will be re-run), and the summaries
        of rounds numbered after ``after_round`` (their numbers will be used again). Tasks stay,
        and so do the teacher's verdicts and usage: that money was spent."""
        with self._tx() as c:
            for table in ("trajectories", "history", "signals", "metrics"):
                c.execute(f"DELETE FROM {table} WHERE step > ?", (step,))
            c.execute("DELETE FROM evals WHERE step > ?", (step,))
            if after_round is not None:
                c.execute("DELETE FROM rounds WHERE round > ?", (after_round,))

    def get_trajectory(self, traj_id: str) -> Trajectory | None:
        rows = self._query("SELECT data FROM trajectories WHERE id = ?", (traj_id,))
        return Trajectory.model_validate_json(rows[0][0]) if rows else None

    def get_signal(self, signal_id: str) -> Signal | None:
        rows = self._query("SELECT data FROM signals WHERE id = ?", (signal_id,))
        return Signal.model_validate_json(rows[0][0]) if rows else None

    def metrics(self) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for step, key, value in self._query("SELECT step, key, value FROM metrics ORDER BY step"):
            out.setdefault(int(step), {})[key] = float(value)
        return out

    def score_by_origin(self) -> list[tuple[int, str, float, int]]:
        """(step, task origin, mean score, trajectories) of the training rollouts."""
        return [(int(s), o, float(v), int(n)) for s, o, v, n in self._query(
            "SELECT tr.step, t.origin, AVG(tr.score), COUNT(*) FROM trajectories tr JOIN tasks t ON t.id = tr.task_id "
            "WHERE tr.phase = 'train' GROUP BY tr.step, t.origin ORDER BY tr.step")]

    def signal_counts(self) -> list[tuple[int, str, int]]:
        return [(int(s), k, int(n)) for s, k, n in self._query("SELECT step, kind, COUNT(*) FROM signals GROUP BY step, kind ORDER BY step")]

    def steps_done(self) -> list[int]:
        return [int(r[0]) for r in self._query("SELECT DISTINCT step FROM metrics WHERE key = 'reward_mean' ORDER BY step")]

    # ---------------------------------------------------------------- evolution
    def record_round(self, round_id: int, step: int, data: dict[str, Any]) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO rounds(round, step, data) VALUES (?,?,?)", (round_id, step, json.dumps(data)))

    def rounds(self) -> list[dict[str, Any]]:
        return [{"round": r, "step": s, **json.loads(d)} for r, s, d in self._query("SELECT round, step, data FROM rounds ORDER BY round")]

    def record_verdict(self, step: int, round_id: int | None, candidate: CandidateTask, verdict: Verdict, task_id: str | None) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO verdicts(candidate_id, step, round, signal_id, accepted, reason, task_id, candidate, verdict) VALUES (?,?,?,?,?,?,?,?,?)",
                (candidate.id, step, round_id, candidate.signal_id, int(verdict.accepted), verdict.reason, task_id,
                 candidate.model_dump_json(), verdict.model_dump_json()),
            )

    def verdicts(self, accepted: bool | None = None) -> list[dict[str, Any]]:
        sql = "SELECT step, round, signal_id, accepted, reason, task_id, candidate FROM verdicts"
        args: tuple[Any, ...] = ()
        if accepted is not None:
            sql += " WHERE accepted = ?"
            args = (int(accepted),)
        return [
            {"step": s, "round": r, "signal_id": sig, "accepted": bool(a), "reason": why, "task_id": tid, "candidate": json.loads(cand)}
            for s, r, sig, a, why, tid, cand in self._query(sql + " ORDER BY step", args)
        ]

    def record_usage(self, step: int, round_id: int | None, signal_id: str | None, task_ids: list[str], usage: TeacherUsage, seconds: float = 0.0) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO teacher_usage(step, round, signal_id, task_ids, calls, prompt_tokens, completion_tokens, cost_usd, failures, seconds) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (step, round_id, signal_id, json.dumps(task_ids), usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd, usage.failures, seconds),
            )

    def usage_rows(self) -> list[dict[str, Any]]:
        cols = ["step", "round", "signal_id", "task_ids", "calls", "prompt_tokens", "completion_tokens", "cost_usd", "failures", "seconds"]
        rows = self._query(f"SELECT {', '.join(cols)} FROM teacher_usage ORDER BY id")
        out = []
        for r in rows:
            d = dict(zip(cols, r))
            d["task_ids"] = json.loads(d["task_ids"])
            out.append(d)
        return out

    def usage_for_task(self, task_id: str) -> list[dict[str, Any]]:
        return [u for u in self.usage_rows() if task_id in u["task_ids"]]

    # ---------------------------------------------------------------- evaluation
    def record_eval(self, step: int, phase: str, split: str, data: dict[str, Any]) -> None:
        with self._tx() as c:
            # keyed by (phase, step, split): a resumed or repeated evaluation replaces its row
            c.execute("DELETE FROM evals WHERE phase = ? AND split = ? AND step = ?", (phase, split, step))
            c.execute("INSERT INTO evals(step, phase, split, data) VALUES (?,?,?,?)", (step, phase, split, json.dumps(data)))

    def evals(self) -> list[dict[str, Any]]:
        return [{"step": s, "phase": p, "split": sp, **json.loads(d)} for s, p, sp, d in self._query("SELECT step, phase, split, data FROM evals ORDER BY id")]
