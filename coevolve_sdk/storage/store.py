"""RunStore: one SQLite file per run holding everything worth keeping about it.

WAL mode and one transaction per write batch: a crash or SIGKILL at any point leaves the file
at the last committed batch. The checkpoint is the truth about a run (docs/run-folder.md):
``rollback`` removes what was written after the checkpoint a run resumes from (tasks admitted,
rounds, signals, trajectories, metrics, evaluation rows), and those steps are replayed. The
teacher's usage rows are money spent and are never removed: rows of a rolled-back round are
marked with the attempt they belonged to.

A store opened with ``read_only=True`` (``coevolve eval``, ``report``, ``pool``, ``signals``,
the experiment runner) never writes, so it can be read while a run writes it.
"""

from __future__ import annotations

import errno
import json
import sqlite3
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from coevolve_sdk.storage.diskspace import DiskFull, disk_full_cause
from coevolve_sdk.errors import ResumeError
from coevolve_sdk.records import CandidateTask, Signal, Task, TeacherUsage, Trajectory, Verdict

__all__ = ["RunStore", "SCHEMA_VERSION", "StoreDamaged"]

#: 1: up to commit fa4cf36. 2: run id, signals.round filled, round_starts, rolled-back rounds
#: and attempts, config revisions.
SCHEMA_VERSION = 2

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

# added by schema 2 (a store of schema 1 gains them when a run resumes it)
_SCHEMA_2 = """
CREATE TABLE IF NOT EXISTS round_starts (
    round INTEGER PRIMARY KEY, step INTEGER NOT NULL, digest TEXT NOT NULL, unguided INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rolled_back_rounds (
    attempt INTEGER PRIMARY KEY AUTOINCREMENT, round INTEGER NOT NULL, step INTEGER NOT NULL, digest TEXT,
    data TEXT, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS config_revisions (
    revision INTEGER PRIMARY KEY AUTOINCREMENT, step INTEGER NOT NULL, created REAL NOT NULL, config TEXT NOT NULL,
    changes TEXT NOT NULL, forced INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS signals_round ON signals(round);
CREATE TABLE IF NOT EXISTS notes (step INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (step, kind));
"""

_ATTEMPT_COLUMNS = ("teacher_usage", "verdicts")


class StoreDamaged(ResumeError):
    """``run.sqlite`` cannot be read as a run store (not a database, damaged, newer schema)."""


class RunStore:
    """Thread-safe access to the run's SQLite file (one connection, one lock).

    ``read_only=True`` opens an existing file without ever writing to it (no schema, no
    migration) and fails with ``StoreDamaged`` when it is missing or not a run store."""

    def __init__(self, path: str | Path, *, read_only: bool = False, check: bool = False, compress: bool = False,
                 keep_steps: int | None = None) -> None:
        self.path = Path(path)
        self.read_only = read_only
        # store.compress_trajectories: trajectories written from now on are zlib-compressed JSON
        # (a BLOB); rows of either kind are read back, so the setting may change on resume
        self.compress = compress
        # store.keep_trajectory_steps: record_step prunes the training trajectories of the step
        # this many steps back (prune_trajectories); None keeps every one whole
        self.keep_steps = keep_steps
        self._lock = threading.RLock()
        if read_only:
            if not self.path.is_file():
                raise StoreDamaged(f"{self.path} does not exist: this is not a run folder, or its store was deleted.")
            uri = f"file:{self.path.resolve()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30.0)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        try:
            if check:
                self._quick_check()
            if not read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                with self._tx() as c:
                    c.executescript(_SCHEMA + _SCHEMA_2)
                    c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self._migrate()
            self.schema_version = int(self.get_meta("schema_version", 0) or 0)
        except sqlite3.DatabaseError as e:
            self._db.close()
            if disk_full_cause(e) is not None:  # a full disk is not a damaged store
                raise self._full(e) from e
            raise StoreDamaged(
                f"{self.path} is damaged or not a run store ({e}). If you have a copy of it, put it back; "
                f"otherwise the run's history is lost: start again with `coevolve run --resume {self.path.parent} --restart`, "
                f"which keeps nothing, or start a new run elsewhere."
            ) from None
        if self.schema_version > SCHEMA_VERSION:
            self._db.close()
            raise StoreDamaged(
                f"{self.path} was written by a newer coevolve-sdk (store schema {self.schema_version}; this one reads up "
                f"to {SCHEMA_VERSION}). Upgrade coevolve-sdk to read or resume it."
            )
        self._columns = {t: {r[1] for r in self._query(f"PRAGMA table_info({t})")} for t in _ATTEMPT_COLUMNS}

    def _quick_check(self) -> None:
        rows = self._query("PRAGMA quick_check")
        verdict = "; ".join(str(r[0]) for r in rows[:5])
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"integrity check failed: {verdict}")

    def _migrate(self) -> None:
        """Schema 1 → 2 (and a new store): the new tables exist already (CREATE IF NOT
        EXISTS); add the columns that schema 1's tables lack."""
        with self._tx() as c:
            for table in _ATTEMPT_COLUMNS:
                cols = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
                if "attempt" not in cols:
                    c.execute(f"ALTER TABLE {table} ADD COLUMN attempt INTEGER")
            if int(self.get_meta("schema_version", 1) or 1) < SCHEMA_VERSION:
                c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

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
            except BaseException as e:
                self._db.rollback()
                if isinstance(e, sqlite3.Error) and not self.read_only and disk_full_cause(e, self.path) is not None:
                    raise self._full(e) from e
                raise

    def _full(self, e: BaseException) -> DiskFull:
        """A write the disk had no room for: the transaction is rolled back, the file is intact."""
        return DiskFull("the run's store", self.path, disk_full_cause(e, self.path) or errno.ENOSPC, f"{type(e).__name__}: {e}")

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

    @property
    def run_id(self) -> str | None:
        """The id of the run this store belongs to; every checkpoint's state carries it too."""
        return self.get_meta("run_id")

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

    def max_task_seq(self) -> int:
        """The admission number of the newest task (0 for an empty pool): checkpoints record it."""
        return int(self._query("SELECT COALESCE(MAX(seq), 0) FROM tasks")[0][0])

    def legacy_task_seq(self, pool_size: int) -> int:
        """The newest task of a pool of ``pool_size`` tasks: checkpoints written before they
        recorded ``task_seq`` recorded the pool's size, and tasks are numbered in admission order."""
        if pool_size <= 0:
            return 0
        rows = self._query("SELECT seq FROM tasks ORDER BY seq LIMIT 1 OFFSET ?", (pool_size - 1,))
        return int(rows[0][0]) if rows else self.max_task_seq()

    def task_counts(self) -> dict[str, int]:
        return {o: n for o, n in self._query("SELECT origin, COUNT(*) FROM tasks WHERE split = 'train' GROUP BY origin")}

    def admitted_task_use(self) -> dict[str, int]:
        """How many tasks the run's evolution admitted (origin ``synthetic``) and how many of them
        a training step actually sampled (at least one ``train`` trajectory): what an experiment
        reports per run, since a task admitted late or never drawn teaches nothing."""
        admitted = self._query("SELECT COUNT(*) FROM tasks WHERE origin = 'synthetic' AND split = 'train'")[0][0]
        trained = self._query("SELECT COUNT(DISTINCT j.task_id) FROM trajectories j JOIN tasks t ON t.id = j.task_id "
                              "WHERE j.phase = 'train' AND t.origin = 'synthetic' AND t.split = 'train'")[0][0]
        return {"admitted": int(admitted), "trained_on": int(trained)}

    def training_success(self, first_step: int, last_step: int) -> dict[str, tuple[int, int]]:
        """Per task, (successes, trajectories) of its training rollouts in steps ``first_step`` to
        ``last_step``. Pruning keeps every row's success flag, so this holds for any past step."""
        return {tid: (int(w), int(n)) for tid, w, n in self._query(
            "SELECT task_id, SUM(success), COUNT(*) FROM trajectories WHERE phase = 'train' AND step BETWEEN ? AND ? "
            "GROUP BY task_id", (first_step, last_step))}

    def pool_growth(self) -> list[tuple[int, str, int]]:
        """(step admitted, origin, count) rows for the report's pool-growth plot."""
        return [(int(s if s is not None else 0), o, int(n)) for s, o, n in self._query(
            "SELECT step_admitted, origin, COUNT(*) FROM tasks WHERE split = 'train' GROUP BY step_admitted, origin ORDER BY step_admitted")]

    # ---------------------------------------------------------------- step records
    def _traj_data(self, t: Trajectory) -> str | bytes:
        """A trajectory row's ``data``: its JSON without the token arrays, compressed when asked
        (text of agent turns and observations compresses about 4x; a paper-size run's store is
        0.2-2.3 GB plain, see docs/performance.md). Level 1: a few percent larger than level 6
        and several times faster on long turns, so a paper step's 256 rows cost well under 1 s."""
        text = t.without_tokens().model_dump_json()
        return zlib.compress(text.encode(), 1) if self.compress else text

    @staticmethod
    def _traj_json(data: str | bytes) -> str | bytes:
        return zlib.decompress(data) if isinstance(data, bytes) else data

    def record_step(self, step: int, trajectories: list[Trajectory], signals: list[Signal],
                    metrics: dict[str, float] | None = None) -> None:
        """All of one step's records in one transaction: either the whole step is there or none of it.
        (The loop writes a step's metrics after its update, with ``add_metrics``.)"""
        with self._tx() as c:
            for t in trajectories:
                c.execute(
                    "INSERT OR REPLACE INTO trajectories(id, step, task_id, score, success, phase, data) VALUES (?,?,?,?,?,?,?)",
                    (t.id, step, t.task_id, t.score, int(t.success), "train", self._traj_data(t)),
                )
            for s in signals:
                c.execute(
                    "INSERT OR REPLACE INTO signals(id, step, round, kind, task_id, trajectory_id, data) VALUES (?,?,?,?,?,?,?)",
                    (s.id, step, None, s.kind, s.task_id, s.trajectory_id, s.model_dump_json()),
                )
            for k, v in (metrics or {}).items():
                c.execute("INSERT OR REPLACE INTO metrics(step, key, value) VALUES (?,?,?)", (step, k, float(v)))
            if self.keep_steps is not None and step - self.keep_steps >= 1:
                self._prune(c, step - self.keep_steps, step - self.keep_steps)

    # a pruned row's data: the trajectory without its turns (still a valid Trajectory record)
    _PRUNED_MARK = '"info":{"pruned":true}'

    def prune_trajectories(self, through: int) -> int:
        """Drop the turns of training trajectories of steps up to ``through`` (store.keep_trajectory_steps).

        What stays: every row (id, step, task, score, success: the report's score plots and
        ``coevolve trajectories`` listings read these), the whole trajectory when a signal or a
        task's lineage points to it (the teacher reflects on it, ``coevolve pool show`` prints
        it), and every evaluation trajectory. The detectors never read old trajectories: their
        state and the competence history are in the checkpoint. Pruning depends only on the
        step, so a resumed run prunes exactly what an uninterrupted one does. Returns the rows
        pruned; SQLite reuses the freed pages, so the file stops growing rather than shrinking."""
        if through < 1:
            return 0
        with self._tx() as c:
            return self._prune(c, 1, through)

    def _prune(self, c: sqlite3.Connection, first: int, last: int) -> int:
        keep = ("SELECT trajectory_id FROM signals UNION SELECT j.value FROM signals s, json_each(s.data, '$.trajectory_ids') j "
                "UNION SELECT json_extract(data, '$.lineage.trajectory_id') AS t FROM tasks WHERE t IS NOT NULL")  # a NULL would keep all
        steps = [r[0] for r in c.execute(
            f"SELECT DISTINCT step FROM trajectories WHERE phase = 'train' AND step BETWEEN ? AND ? "
            f"AND NOT (typeof(data) = 'text' AND instr(data, ?) > 0) AND id NOT IN ({keep})",
            (first, last, self._PRUNED_MARK)).fetchall()]
        pruned = 0
        for step in steps:
            # the step's rows are deleted and written again in their order: updating them in place
            # would leave every leaf page they filled nearly empty, and the file would keep growing
            rows = c.execute(f"SELECT id, task_id, score, success, data, id IN ({keep}) FROM trajectories "
                             f"WHERE phase = 'train' AND step = ? ORDER BY rowid", (step,)).fetchall()
            c.execute("DELETE FROM trajectories WHERE phase = 'train' AND step = ?", (step,))
            for tid, task_id, score, success, data, kept in rows:
                if not kept and not (isinstance(data, str) and self._PRUNED_MARK in data):
                    data = Trajectory(id=tid, task_id=task_id, step=step, score=score, success=bool(success),
                                      info={"pruned": True}).model_dump_json()
                    pruned += 1
                c.execute("INSERT INTO trajectories(id, step, task_id, score, success, phase, data) VALUES (?,?,?,?,?,?,?)",
                          (tid, step, task_id, score, success, "train", data))
        return pruned

    def add_metrics(self, step: int, metrics: dict[str, float]) -> None:
        with self._tx() as c:
            for k, v in (metrics or {}).items():
                c.execute("INSERT OR REPLACE INTO metrics(step, key, value) VALUES (?,?,?)", (step, k, float(v)))

    def rollback(self, step: int, task_seq: int, round_id: int, keep_seed_pool: bool = True) -> dict[str, int]:
        """Remove what was written after the checkpoint of ``step`` (docs/run-folder.md).

        The checkpoint recorded the newest task (``task_seq``) and the last round started
        (``round_id``). Gone: tasks admitted after it, the step records (trajectories,
        signals, metrics) and evaluations of later steps, the final evaluation (it follows the
        last checkpoint), and rounds started after it, which move to ``rolled_back_rounds`` with
        their input digest so that a replay with identical inputs can reuse them instead of
        paying the teacher again. Their usage and verdict rows stay, marked with that attempt.
        Signals consumed by a rolled-back round are pending again. Returns what was removed."""
        removed: dict[str, int] = {}
        with self._tx() as c:
            removed["tasks"] = c.execute("DELETE FROM tasks WHERE seq > ?", (task_seq,)).rowcount
            removed["trajectories"] = c.execute(
                "DELETE FROM trajectories WHERE step > ? OR phase = 'eval-after'", (step,)).rowcount
            for table in ("signals", "metrics", "notes"):  # (folders before 2026-12 also hold an unread history table)
                removed[table] = c.execute(f"DELETE FROM {table} WHERE step > ?", (step,)).rowcount
            removed["evals"] = c.execute("DELETE FROM evals WHERE step > ? OR phase = 'after'", (step,)).rowcount
            c.execute("UPDATE signals SET round = NULL WHERE round > ?", (round_id,))
            later: dict[int, list[Any]] = {}
            for rnd, rstep, digest in c.execute("SELECT round, step, digest FROM round_starts WHERE round > ?", (round_id,)):
                later[rnd] = [rstep, digest, None]
            for rnd, rstep, data in c.execute("SELECT round, step, data FROM rounds WHERE round > ?", (round_id,)):
                later.setdefault(rnd, [rstep, None, None])[2] = data
            for rnd, (rstep, digest, data) in sorted(later.items()):
                attempt = c.execute(
                    "INSERT INTO rolled_back_rounds(round, step, digest, data, created) VALUES (?,?,?,?,?)",
                    (rnd, rstep, digest, data, time.time())).lastrowid
                for table in _ATTEMPT_COLUMNS:
                    c.execute(f"UPDATE {table} SET attempt = ? WHERE round = ? AND attempt IS NULL", (attempt, rnd))
            removed["rounds"] = len(later)
            c.execute("DELETE FROM rounds WHERE round > ?", (round_id,))
            c.execute("DELETE FROM round_starts WHERE round > ?", (round_id,))
            # the teacher's judge on training rollouts of replayed steps: spent, kept, marked
            c.execute("UPDATE teacher_usage SET attempt = -1 WHERE round IS NULL AND step > ? AND attempt IS NULL", (step,))
            if not keep_seed_pool:  # the seed pool is explored again: its first attempt was paid for
                for table in _ATTEMPT_COLUMNS:
                    c.execute(f"UPDATE {table} SET attempt = -1 WHERE round IS NULL AND step = 0 AND attempt IS NULL")
        return removed

    def get_trajectory(self, traj_id: str) -> Trajectory | None:
        rows = self._query("SELECT data FROM trajectories WHERE id = ?", (traj_id,))
        return Trajectory.model_validate_json(self._traj_json(rows[0][0])) if rows else None

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
        """Steps whose records are complete (their metrics are written last)."""
        return [int(r[0]) for r in self._query(
            "SELECT DISTINCT step FROM metrics WHERE key IN ('rollout/reward_mean', 'reward_mean') ORDER BY step")]

    # ---------------------------------------------------------------- evolution
    def record_round(self, round_id: int, step: int, data: dict[str, Any]) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO rounds(round, step, data) VALUES (?,?,?)", (round_id, step, json.dumps(data)))

    def rounds(self) -> list[dict[str, Any]]:
        return [{"round": r, "step": s, **json.loads(d)} for r, s, d in self._query("SELECT round, step, data FROM rounds ORDER BY round")]

    def round_result(self, round_id: int) -> dict[str, Any] | None:
        rows = self._query("SELECT step, data FROM rounds WHERE round = ?", (round_id,))
        return {"round": round_id, "step": rows[0][0], **json.loads(rows[0][1])} if rows else None

    def start_round(self, round_id: int, step: int, digest: str, unguided: bool, signal_ids: list[str]) -> None:
        """Record that round ``round_id`` starts at ``step`` and consumes ``signal_ids``: from
        now on the store says which round each signal went to (``signals.round``)."""
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO round_starts(round, step, digest, unguided) VALUES (?,?,?,?)",
                      (round_id, step, digest, int(unguided)))
            c.executemany("UPDATE signals SET round = ? WHERE id = ?", [(round_id, sid) for sid in signal_ids])

    def round_start(self, round_id: int) -> dict[str, Any] | None:
        rows = self._query("SELECT step, digest, unguided FROM round_starts WHERE round = ?", (round_id,))
        return {"round": round_id, "step": rows[0][0], "digest": rows[0][1], "unguided": bool(rows[0][2])} if rows else None

    def pending_signals(self) -> list[Signal]:
        """Signals no round has consumed yet, in the order they were detected."""
        return [Signal.model_validate_json(d) for (d,) in self._query("SELECT data FROM signals WHERE round IS NULL ORDER BY step, rowid")]

    def round_signals(self, round_id: int) -> list[Signal]:
        """The signals round ``round_id`` consumed, in the order they were detected."""
        return [Signal.model_validate_json(d) for (d,) in self._query(
            "SELECT data FROM signals WHERE round = ? ORDER BY step, rowid", (round_id,))]

    def assign_signals(self, round_id: int | None, signal_ids: list[str]) -> None:
        with self._tx() as c:
            c.executemany("UPDATE signals SET round = ? WHERE id = ?", [(round_id, sid) for sid in signal_ids])

    def reusable_round(self, round_id: int, digest: str) -> dict[str, Any] | None:
        """A rolled-back result of round ``round_id`` computed from the same inputs, if any."""
        rows = self._query("SELECT attempt, step, data FROM rolled_back_rounds WHERE round = ? AND digest = ? AND data IS NOT NULL "
                           "ORDER BY attempt DESC LIMIT 1", (round_id, digest))
        if not rows:
            return None
        attempt, step, data = rows[0]
        return {"attempt": attempt, "round": round_id, "step": step, **json.loads(data)}

    def reuse_round(self, attempt: int) -> None:
        """Bring a rolled-back round back (its result, usage and verdicts), consuming the archive row."""
        with self._tx() as c:
            rnd, step, data = c.execute("SELECT round, step, data FROM rolled_back_rounds WHERE attempt = ?", (attempt,)).fetchone()
            c.execute("INSERT OR REPLACE INTO rounds(round, step, data) VALUES (?,?,?)", (rnd, step, data))
            for table in _ATTEMPT_COLUMNS:
                c.execute(f"UPDATE {table} SET attempt = NULL WHERE attempt = ?", (attempt,))
            c.execute("DELETE FROM rolled_back_rounds WHERE attempt = ?", (attempt,))

    def rolled_back_rounds(self) -> list[dict[str, Any]]:
        if not self._has_table("rolled_back_rounds"):
            return []
        return [{"attempt": a, "round": r, "step": s, "finished": d is not None}
                for a, r, s, d in self._query("SELECT attempt, round, step, data FROM rolled_back_rounds ORDER BY attempt")]

    def _has_table(self, name: str) -> bool:
        return bool(self._query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    def record_verdict(self, step: int, round_id: int | None, candidate: CandidateTask, verdict: Verdict, task_id: str | None) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO verdicts(candidate_id, step, round, signal_id, accepted, reason, task_id, candidate, verdict) VALUES (?,?,?,?,?,?,?,?,?)",
                (candidate.id, step, round_id, candidate.signal_id, int(verdict.accepted), verdict.reason, task_id,
                 candidate.model_dump_json(), verdict.model_dump_json()),
            )

    def verdicts(self, accepted: bool | None = None) -> list[dict[str, Any]]:
        """Verdicts of the rounds that count (those of rolled-back attempts are left out)."""
        sql = "SELECT step, round, signal_id, accepted, reason, task_id, candidate FROM verdicts"
        conds, args = [], []
        if "attempt" in self._columns["verdicts"]:
            conds.append("attempt IS NULL")
        if accepted is not None:
            conds.append("accepted = ?")
            args.append(int(accepted))
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        args = tuple(args)  # type: ignore[assignment]
        return [
            {"step": s, "round": r, "signal_id": sig, "accepted": bool(a), "reason": why, "task_id": tid, "candidate": json.loads(cand)}
            for s, r, sig, a, why, tid, cand in self._query(sql + " ORDER BY step", tuple(args))
        ]

    def record_usage(self, step: int, round_id: int | None, signal_id: str | None, task_ids: list[str], usage: TeacherUsage, seconds: float = 0.0) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO teacher_usage(step, round, signal_id, task_ids, calls, prompt_tokens, completion_tokens, cost_usd, failures, seconds) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (step, round_id, signal_id, json.dumps(task_ids), usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd, usage.failures, seconds),
            )

    def usage_rows(self) -> list[dict[str, Any]]:
        """Every teacher bill, including those of rolled-back attempts (``rolled_back`` says
        which): money spent is never forgotten, even when the work it bought was replayed."""
        cols = ["step", "round", "signal_id", "task_ids", "calls", "prompt_tokens", "completion_tokens", "cost_usd", "failures", "seconds"]
        has_attempt = "attempt" in self._columns["teacher_usage"]
        rows = self._query(f"SELECT {', '.join(cols)}{', attempt' if has_attempt else ''} FROM teacher_usage ORDER BY id")
        out = []
        for r in rows:
            d = dict(zip(cols, r))
            d["task_ids"] = json.loads(d["task_ids"])
            d["rolled_back"] = bool(has_attempt and r[-1] is not None)
            out.append(d)
        return out

    def usage_for_task(self, task_id: str) -> list[dict[str, Any]]:
        return [u for u in self.usage_rows() if task_id in u["task_ids"] and not u["rolled_back"]]

    # ---------------------------------------------------------------- evaluation
    def record_eval(self, step: int, phase: str, split: str, data: dict[str, Any], trajectories: list[Trajectory] | None = None) -> None:
        """One evaluation's row and trajectories in one transaction, keyed by (phase, step,
        split): a replayed or repeated evaluation replaces both, never adds to them."""
        with self._tx() as c:
            c.execute("DELETE FROM evals WHERE phase = ? AND split = ? AND step = ?", (phase, split, step))
            c.execute("INSERT INTO evals(step, phase, split, data) VALUES (?,?,?,?)", (step, phase, split, json.dumps(data)))
            c.execute("DELETE FROM trajectories WHERE phase = ? AND step = ?", (f"eval-{phase}", step))
            for t in trajectories or []:
                c.execute(
                    "INSERT OR REPLACE INTO trajectories(id, step, task_id, score, success, phase, data) VALUES (?,?,?,?,?,?,?)",
                    (t.id, step, t.task_id, t.score, int(t.success), f"eval-{phase}", self._traj_data(t)),
                )

    def evals(self) -> list[dict[str, Any]]:
        return [{"step": s, "phase": p, "split": sp, **json.loads(d)} for s, p, sp, d in self._query("SELECT step, phase, split, data FROM evals ORDER BY id")]

    # ---------------------------------------------------------------- notes
    def add_note(self, step: int, kind: str, text: str) -> None:
        """Something a person should see in the report (a skipped round, dropped seed tasks)."""
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO notes(step, kind, text) VALUES (?,?,?)", (step, kind, text))

    def notes(self) -> list[dict[str, Any]]:
        if not self._has_table("notes"):
            return []
        return [{"step": s, "kind": k, "text": t} for s, k, t in self._query("SELECT step, kind, text FROM notes ORDER BY step, kind")]

    # ---------------------------------------------------------------- configuration
    def record_config_revision(self, step: int, config: dict[str, Any], changes: list[str], forced: bool) -> int:
        """A resume with a changed configuration: the new config becomes the run's, and the
        revision (what changed, at which step, whether it was forced) is kept."""
        with self._tx() as c:
            rev = c.execute("INSERT INTO config_revisions(step, created, config, changes, forced) VALUES (?,?,?,?,?)",
                            (step, time.time(), json.dumps(config), json.dumps(changes), int(forced))).lastrowid
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('config', ?)", (json.dumps(config),))
        return int(rev)

    def config_revisions(self) -> list[dict[str, Any]]:
        if not self._has_table("config_revisions"):
            return []
        return [{"revision": r, "step": s, "created": t, "changes": json.loads(ch), "forced": bool(f)}
                for r, s, t, ch, f in self._query("SELECT revision, step, created, changes, forced FROM config_revisions ORDER BY revision")]
