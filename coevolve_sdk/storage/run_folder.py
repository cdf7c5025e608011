"""The run folder: what is in it, opening it safely, and what may change when a run resumes.

A run folder holds ``config.yaml``, ``run.sqlite`` (the store), ``checkpoints/`` and the report.
The rules this module enforces (docs/run-folder.md):

* a folder is written by one process at a time (``runlock.RunLock``);
* a store that is missing, empty or damaged next to checkpoints is an error with a way out,
  never a silently empty run; the store and every checkpoint carry the run's id, so the two
  halves of different runs are never mixed;
* nothing is deleted to start over unless asked for (``--restart``, which moves the old
  store and checkpoints aside into ``RUN_DIR/previous-<time>/`` rather than deleting them);
* on resume, settings that do not change what was trained so far (steps, checkpoint and
  evaluation cadence, evaluation size, logging, workers, and component options that say so)
  may change and are recorded as a config revision; anything else is refused with the list of
  differences unless ``--allow-config-change``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from pydantic import BaseModel, ValidationError

from coevolve_sdk.storage.machine import record_start
from coevolve_sdk.storage.checkpoints import checkpoints_newest_first, newest_intact, read_state, set_aside
from coevolve_sdk.components.base import KINDS
from coevolve_sdk.config import RunConfig
from coevolve_sdk.errors import ConfigError, ResumeError
from coevolve_sdk.storage.store import RunStore, StoreDamaged

__all__ = ["RunFolder", "Start", "config_differences", "MAY_CHANGE_ON_RESUME", "open_store_read_only"]

#: settings that may differ on resume without changing what the steps done so far mean
MAY_CHANGE_ON_RESUME = (
    "run_dir", "plugins",
    "training.steps", "training.checkpoint_every", "training.keep_checkpoints",
    "eval.every", "eval.max_tasks", "eval.before", "eval.after",
    "evolution.workers", "rollout.env_workers", "store.compress_trajectories", "store.keep_trajectory_steps",
)


def open_store_read_only(run_dir: Path) -> RunStore:
    """The store of a run folder for reading (no lock; works while the run writes it)."""
    db = Path(run_dir) / "run.sqlite"
    if not db.is_file():
        raise ResumeError(f"{run_dir} is not a run folder (no run.sqlite). Pass the run_dir of a run started with `coevolve run`.")
    return RunStore(db, read_only=True)


@dataclass
class Start:
    """Where a run starts: its store (rolled back to that point), the checkpoint to load (None:
    from step 0) and its state, or ``finished`` when a finished run has nothing left to do."""

    store: RunStore
    checkpoint: Path | None = None
    state: dict[str, Any] = field(default_factory=dict)
    finished: bool = False
    #: a changed configuration, recorded once the checkpoint has loaded (``record_revision``):
    #: a change the checkpoint does not fit (a model's size) must leave no trace in the folder
    revision: Callable[[], None] | None = None

    def record_revision(self) -> None:
        if self.revision is not None:
            self.revision()
            self.revision = None

    @property
    def step(self) -> int:
        return int(self.state.get("step", 0))


class RunFolder:
    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir)
        self.db = self.path / "run.sqlite"
        self.checkpoints = self.path / "checkpoints"

    def has_history(self) -> bool:
        return bool(checkpoints_newest_first(self.checkpoints)) or (self.db.is_file() and self.db.stat().st_size > 0)

    def restart(self) -> Path | None:
        """Move the store, checkpoints, report and TensorBoard logs into ``previous-<time>/``
        (``--restart``): the run starts again from nothing, and nothing is deleted."""
        movable = [p for p in (self.db, self.db.with_name("run.sqlite-wal"), self.db.with_name("run.sqlite-shm"), self.checkpoints,
                               self.path / "report.html", self.path / "report", self.path / "tensorboard") if p.exists()]
        if not movable:
            return None
        target = self.path / f"previous-{time.strftime('%Y%m%d-%H%M%S')}"
        target.mkdir()
        for p in movable:
            p.rename(target / p.name)
        return target

    def open_store(self, *, resume: bool) -> RunStore:
        """The store for writing, checked: on resume it must exist, be intact, and not be empty
        when checkpoints say the run has trained."""
        ckpts = checkpoints_newest_first(self.checkpoints)
        folder = self.path
        way_out = (f"If you have a copy of run.sqlite, put it back. Otherwise `coevolve run --resume {folder} --restart` starts "
                   f"this run again from step 0 (the old files are moved into {folder}/previous-<time>/, not deleted).")
        if resume and ckpts and (not self.db.is_file() or self.db.stat().st_size == 0):
            state = "missing" if not self.db.is_file() else "empty"
            raise ResumeError(f"{self.db} is {state}, but {folder} holds checkpoints up to {ckpts[0].name}: the task pool, "
                              f"signals and history of the run are in that file. {way_out}")
        store = RunStore(self.db, check=resume)
        if store.run_id is None:
            if resume and ckpts and not store.load_tasks():
                store.close()
                raise StoreDamaged(f"{self.db} holds no run (no run id, no task) but {folder} holds checkpoints up to "
                                   f"{ckpts[0].name}. {way_out}")
            store.set_meta("run_id", uuid.uuid4().hex)  # a new run, or a run folder written before run ids
        return store


    def start(self, cfg: RunConfig, registry: Any, *, resume: bool, restart: bool, allow_config_change: bool,
              log: Callable[[str], None]) -> Start:
        """Open the folder for a run (main process, under the lock) and roll it back to where
        training starts: a fresh run, the newest intact checkpoint, or step 0 keeping a complete
        seed pool when no checkpoint was written yet."""
        if restart:
            moved = self.restart()
            if moved is not None:
                log(f"--restart: the previous store and checkpoints are in {moved}")
        elif not resume and self.has_history():
            raise ResumeError(f"{self.path} already holds a run. Continue it with `coevolve run --resume {self.path}`, start it "
                              f"again from step 0 with `coevolve run --resume {self.path} --restart`, or choose another run_dir.")
        resume = resume and not restart
        config = cfg.model_dump(mode="json")
        if not resume:  # config.yaml first: a run killed from here on can be resumed
            self.path.mkdir(parents=True, exist_ok=True)
            (self.path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        store = self.open_store(resume=resume)
        store.compress = cfg.store.compress_trajectories
        store.keep_steps = cfg.store.keep_trajectory_steps
        if not resume:
            store.set_meta("config", config)
            store.set_meta("status", "running")
            record_start(store, 0)
            return Start(store)
        changes = check_resume_config(store.get_meta("config"), cfg, registry, allow=allow_config_change,
                                      source=str(self.path / "config.yaml"))
        ckpt = self._choose_checkpoint(store, log)
        state = read_state(ckpt) if ckpt is not None else {"step": 0}
        def revision() -> None:
            store.record_config_revision(int(state["step"]), config, changes, forced=allow_config_change)
            (self.path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            log("configuration changed on resume (recorded as a new revision): " + "; ".join(changes))

        finished = store.get_meta("status") == "finished" and ckpt is not None and int(state["step"]) >= cfg.training.steps
        pending = revision if changes else None
        if pending is not None and (finished or ckpt is None):  # no checkpoint will be loaded that could refuse the change
            pending()
            pending = None
        if finished:
            log(f"{self.path} finished at step {state['step']}: nothing to do (raise training.steps with --set to train on)")
            return Start(store, ckpt, state, finished=True)
        store.set_meta("status", "running")
        if ckpt is None:  # stopped before its first checkpoint
            seed_seq = store.get_meta("seed_pool_seq")
            store.rollback(0, int(seed_seq or 0), 0, keep_seed_pool=seed_seq is not None)
            record_start(store, 0)
            kept = len(store.load_tasks())
            log(f"{self.path} has no checkpoint yet: training starts again from step 0"
                + (f" with the {kept} seed tasks already admitted" if kept else ""))
            return Start(store)
        legacy = "evolution" not in state  # written by coevolve-sdk up to fa4cf36
        task_seq = store.legacy_task_seq(int(state.get("pool_size") or 0)) if legacy else int(state["task_seq"])
        store.rollback(int(state["step"]), task_seq, int(state.get("round", 0) if legacy else state["evolution"]["round"]))
        if store.keep_steps is not None:  # a retention set or shortened on resume applies to the steps before it too
            store.prune_trajectories(int(state["step"]) - store.keep_steps)
        store.set_meta("resumed_from", int(state["step"]))
        record_start(store, int(state["step"]))
        return Start(store, ckpt, state, revision=pending)

    def _choose_checkpoint(self, store: RunStore, log: Callable[[str], None]) -> Path | None:
        """The newest intact checkpoint of this run; damaged ones are set aside, saying so."""
        ckpt = newest_intact(self.checkpoints, lambda bad, problem: log(
            f"checkpoint {bad.name} is damaged ({problem}): set aside as {set_aside(bad).name}; trying the one before it"))
        if ckpt is not None:
            owner = read_state(ckpt).get("run_id")
            if owner is not None and owner != store.run_id:
                raise ResumeError(f"{ckpt} belongs to another run (run id {owner}) than {store.path} (run id {store.run_id}): "
                                  f"the store and the checkpoints of two runs were mixed. Put back this run's own files.")
            return ckpt
        if store.get_meta("last_checkpoint_step"):
            raise ResumeError(
                f"{self.checkpoints} holds no intact checkpoint, but the store says step {store.get_meta('last_checkpoint_step')} "
                f"was checkpointed: the model cannot be restored. Put the checkpoints back, or start again from step 0 with "
                f"`coevolve run --resume {self.path} --restart`.")
        return None


# ---------------------------------------------------------------------------------- config
def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out[f"{prefix}.#"] = len(value)
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}.{i}", out)
    else:
        out[prefix] = value


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted path, old value, new value) for every setting that differs."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(old, "", a)
    _flatten(new, "", b)
    missing = object()
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, missing), b.get(key, missing)
        if va != vb:
            out.append((key, None if va is missing else va, None if vb is missing else vb))
    return out


def _marked(model: type[BaseModel] | None, parts: list[str]) -> bool:
    """Whether the option at ``parts`` (inside an Options model) says it may change on resume:
    ``Field(..., json_schema_extra={"may_change_on_resume": True})`` on it or on a parent field."""
    while model is not None and parts:
        field = model.model_fields.get(parts[0])
        if field is None:
            return False
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("may_change_on_resume"):
            return True
        ann = field.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        parts = parts[1:]
    return False


def _may_change(path: str, new_cfg: RunConfig, registry: Any) -> bool:
    if any(path == p or path.startswith(p + ".") for p in MAY_CHANGE_ON_RESUME):
        return True
    for k in KINDS:  # a component's own options may say they can change (see _marked)
        slot = k.config_path
        if not path.startswith(slot + "."):
            continue
        rest = path[len(slot) + 1 :].split(".")
        comp: Any = new_cfg
        for part in slot.split("."):
            comp = getattr(comp, part)
        if k.many:
            if not rest[0].isdigit() or int(rest[0]) >= len(comp):
                return False
            comp, rest = comp[int(rest[0])], rest[1:]
        if len(rest) < 2 or rest[0] != "options":
            return False
        try:
            options_model = getattr(registry.get(k.name, comp.name), "Options", None)
        except Exception:
            return False
        return _marked(options_model, rest[1:])
    return False


def check_resume_config(stored: dict[str, Any] | None, cfg: RunConfig, registry: Any, *, allow: bool,
                        source: str) -> list[str]:
    """Compare the effective config with the run's stored one. Returns the changes (as
    ``path: old -> new`` lines) to record as a revision; raises ConfigError listing those
    that may not change on resume unless ``allow``."""
    if not stored:
        return []
    new = cfg.model_dump(mode="json")
    try:
        stored_full = RunConfig.model_validate(stored).model_dump(mode="json")
        diffs = config_differences(stored_full, new)
    except ValidationError:  # written by another version: compare the settings it has
        have: dict[str, Any] = {}
        _flatten(stored, "", have)
        diffs = [d for d in config_differences(stored, new) if d[0] in have]
    diffs = [(p, a, b) for p, a, b in diffs if p != "run_dir"]
    refused = [(p, a, b) for p, a, b in diffs if not _may_change(p, cfg, registry)]
    lines = [f"{p}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}" for p, a, b in diffs]
    if refused and not allow:
        listed = "\n".join(f"  - {p}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}" for p, a, b in refused)
        raise ConfigError(
            f"{source}: the configuration differs from the one this run was trained with, in settings that cannot change "
            f"on resume (the steps already done would not mean the same):\n{listed}\n"
            f"Undo those changes (the run's own config is in the store and in config.yaml), start a new run for them, or pass "
            f"--allow-config-change to resume anyway (recorded in the run's config revisions). Settings that may change on "
            f"resume: {', '.join(MAY_CHANGE_ON_RESUME[2:])}, and component options marked so."
        )
    return lines
