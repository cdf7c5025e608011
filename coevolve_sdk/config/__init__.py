"""RunConfig: one YAML file describes a run; components are named by their registered names.

Loading is strict: unknown keys are errors, every component's ``options`` are validated against
that component's own ``Options`` model, and every error names the file, the field path and what
is allowed, so a typo never turns into a silently ignored setting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from coevolve_sdk.components.base import KINDS
from coevolve_sdk.errors import ConfigError, PluginError

__all__ = ["RunConfig", "ComponentConfig", "resolve_component", "RolloutConfig", "ValidationConfig", "load_config", "validate_components", "config_schema"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ComponentConfig(_Strict):
    """A registered component and its options (validated against the component's Options)."""

    name: str = Field(description="Registered name; `coevolve plugins` lists them.")
    options: dict[str, Any] = Field(default_factory=dict, description="Keyword options of the component.")


class RolloutConfig(_Strict):
    """``rollout:``: how the policy's episodes are sampled (training; evaluation is greedy)."""

    group_size: int = Field(8, ge=1, description="Trajectories per task, K (paper: 8).")
    max_new_tokens: int = Field(96, ge=1, description="Tokens the agent may generate per turn.")
    temperature: float = Field(0.9, ge=0.0, description="Sampling temperature in training (paper: 0.9).")
    max_context_tokens: int = Field(2048, ge=16, description="An episode whose tokens would exceed this is truncated.")
    env_workers: int = Field(
        1, ge=1,
        description="Threads that reset, step and score the live episodes' environments at once. More than 1 helps "
        "environments that wait on I/O and declare concurrent_steps (AppWorld's workers: set it to the episodes "
        "alive at once, tasks per step x group size, or the environment's own worker limit); others are stepped "
        "one at a time whatever this says. Trajectories do not depend on it.",
    )


class ValidationConfig(_Strict):
    """``validation:``: what a proposed task must pass, by execution, to join the pool."""

    min_actions: int = Field(3, ge=1, description="Reject tasks with fewer reference actions (paper: 3).")
    max_actions: int = Field(30, ge=1, description="Reject tasks with more reference actions than an episode allows.")
    allow_errors: bool = Field(False, description="Accept a replay in which an action returned an error.")
    accept_positive_reward: bool = Field(True, description="Accept when the replay earned a positive reward even if the grader says no (paper §3.3).")
    max_query_chars: int = Field(4000, ge=1)


class TrainingConfig(_Strict):
    steps: int = Field(120, ge=0, description="Training steps T (paper: 120). 0 trains nothing and only evaluates (the zero-shot arm).")
    tasks_per_step: int = Field(32, ge=1, description="Tasks sampled from the pool per step (paper: 32).")
    checkpoint_every: int = Field(10, ge=1, description="Write a checkpoint every this many steps (and at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept on disk; older ones are deleted.")
    warm_start: bool = Field(True, description="Run the algorithm's supervised warm start on the seed pool first.")
    warm_start_tasks: int | None = Field(
        None, ge=1, description="Warm-start on the reference actions of the environment's first N train tasks instead of the "
        "seed pool's (null: the seed pool). Lets a model built from scratch learn the request language from more "
        "demonstrations than the pool RL trains on, as the paper's instruct model knows its format before RL on a small "
        "D_0. Demonstrations are train tasks only; the pool is still pool.seed_tasks.",
    )


class EvolutionConfig(_Strict):
    enabled: bool = Field(True, description="False trains on the static seed pool (the paper's GRPO baseline).")
    every: int = Field(10, ge=1, description="Evolve every F steps (paper: 10).")
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: a round runs at its step and its tasks join the pool at once. async: the round runs in the "
                            "background while training goes on, and its tasks join the pool after async_lag more steps "
                            "(waiting for the round if it is not done), a fixed step, so that runs are reproducible."
    )
    async_lag: int = Field(1, ge=1, description="async: a round started at step s is admitted before step s + async_lag + 1 "
                                                "samples its tasks, i.e. it overlaps async_lag training steps.")
    max_signals_per_kind: int | None = Field(16, ge=1, description="Signals handed to the teacher per kind per round, after one-per-task dedup.")
    signal_order: Literal["arrival", "weakest"] = Field(
        "arrival", description="Which signals of a kind reach the teacher when there are more than max_signals_per_kind. arrival: "
                               "the earliest detected (the paper). weakest: those whose task the agent solved least often in "
                               "its training rollouts since the oldest pending signal (ties in arrival order), so the "
                               "teacher's budget goes where the agent is furthest from solving; the admission cap then also "
                               "keeps their tasks first. guidance=random ignores it.",
    )
    workers: int = Field(2, ge=1, description="Signals processed concurrently (each gets its own environment).")
    guidance: Literal["signals", "random"] = Field(
        "signals", description="signals: explore from the signalled trajectories (CoEvolve); random: explore, unguided, from "
                              "pool tasks drawn at random, every F steps whatever the signals (the paper's random-exploration arm)."
    )
    random_starts: int | None = Field(
        None, ge=1, description="guidance=random: pool tasks explored from per round (default: max_signals_per_kind x the number of detectors, "
                                "what the run's detectors can hand the teacher at most)."
    )
    random_max_starts: int | None = Field(
        None, ge=1, description="guidance=random with max_admitted_per_round: a round that has validated fewer tasks than the "
                                "cap after its random_starts starts explores from more pool tasks drawn at random, random_starts "
                                "at a time, up to this many starts in all (default: 4 x random_starts), so that the arms compare at "
                                "equal admitted-task counts as far as possible; the round's record says when the bound stopped it."
    )
    max_admitted_per_round: int | None = Field(
        None, ge=1, description="Admit at most this many validated tasks per round (the first in signal order). Equal budgets "
                                "make arms comparable; None: no limit."
    )
    admission_probe: int = Field(
        0, ge=0, description="Before a validated task joins the pool, the current agent tries it this many times, sampled as in "
                             "training; the task is admitted only if the agent solved it in some tries but not all. A task it "
                             "always solves or always fails would give GRPO a group of equal rewards, which teaches nothing. "
                             "The tries are counted (evolution/probe_rollouts; the round's record) and cost every evolving arm "
                             "alike. 0: off, every validated task may join (the paper). At least 2 when on; needs mode: sync "
                             "(the agent must not change while it is tried).",
    )
    judge_rollouts: Literal["off", "confirm"] = Field(
        "off", description="confirm: a training rollout on a synthetic task that the environment graded successful counts "
                           "only if the teacher's judge agrees (a judge that abstains leaves the grade as it is)."
    )

    @model_validator(mode="after")
    def _probe_fits(self) -> "EvolutionConfig":
        if self.admission_probe == 1:
            raise ValueError("admission_probe: 1 try cannot show that the agent solves a task sometimes but not always; "
                             "use 0 (off) or at least 2 (4 is a good start)")
        if self.admission_probe and self.mode != "sync":
            raise ValueError("admission_probe needs mode: sync: in async mode the agent trains while a round runs, so the "
                             "tries would not test a fixed agent; set evolution.mode: sync or admission_probe: 0")
        return self


class PoolConfig(_Strict):
    seed_tasks: int = Field(100, ge=0, description="Size of the initial pool D_0 (paper: 100).")
    seed_source: Literal["explore", "env"] = Field(
        "explore", description="explore: unguided exploration by the teacher from the environment's train tasks (paper); env: take the environment's train tasks as they are."
    )
    sampler: ComponentConfig = Field(default_factory=lambda: ComponentConfig(name="uniform"))


class EvalConfig(_Strict):
    split: str = Field("test", description="Held-out split evaluated greedily.")
    max_tasks: int | None = Field(None, ge=1, description="Evaluate on at most this many tasks of the split.")
    subset: int | None = Field(
        None, ge=1, description="Evaluations before the last one (initial, before, during) score only the first N tasks, so "
        "that a large held-out split costs little during training; the final evaluation ('after', or 'before' in a run that "
        "does not train) scores every task "
        "(up to max_tasks) and also reports its first N (subset_success_rate, subset_mean_score), so that a curve "
        "compares the same tasks from start to end.",
    )
    every: int | None = Field(
        None, ge=1, description="Also evaluate every this many training steps (phase 'during'), greedily on the same tasks, "
                                "so that held-out success can be plotted over training."
    )
    initial: bool = Field(
        False, description="Also evaluate the initial policy before the warm start (phase 'initial'), so that a report shows what "
                           "the warm start and what RL each added. Only with training.warm_start (otherwise 'before' is that row)."
    )
    before: bool = Field(True, description="Evaluate before the first training step (after any warm start; phase 'before').")
    after: bool = Field(True, description="Evaluate after the last training step (phase 'after').")


class StoreConfig(_Strict):
    """How much of a run ``run.sqlite`` keeps (docs/performance.md, "Run-store size")."""

    compress_trajectories: bool = Field(
        True, description="Keep trajectories in run.sqlite as zlib-compressed JSON: about 4x smaller on real text (a paper-size "
        "BFCL run stores 0.2-2.3 GB plain), for ~0.07% of a paper step's time; they are read back the same. On by default "
        "since issue 23; false keeps plain JSON rows (readable with sqlite3 alone). May change on resume.",
    )
    keep_trajectory_steps: int | None = Field(
        None, ge=1, description="Keep the turns of training trajectories of only the last N steps (null: of every step). An older "
        "training trajectory keeps its row (id, step, task, score, success: what the report and the detectors' history use) "
        "but loses its messages and turns, unless a signal or a task's lineage points to it (the teacher reflects on those "
        "and `coevolve pool show` prints them); evaluation trajectories are always kept whole. Bounds the store of a long "
        "run. May change on resume.",
    )


class RunConfig(_Strict):
    """A whole run. ``coevolve config schema`` prints the JSON schema of this model."""

    run_dir: str = Field(description="Folder of the run: store, checkpoints, report. Relative paths are taken from the working directory.")
    seed: int = 0
    plugins: list[str] = Field(default_factory=list, description="Extra importable modules to register as plugins.")
    environment: ComponentConfig
    policy: ComponentConfig
    algorithm: ComponentConfig
    detectors: list[ComponentConfig] = Field(default_factory=list)
    teacher: ComponentConfig = Field(default_factory=lambda: ComponentConfig(name="random-explorer"))
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    evolution: EvolutionConfig = Field(default_factory=EvolutionConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)


def _allowed(err: dict[str, Any]) -> str:
    ctx = err.get("ctx") or {}
    if "expected" in ctx:
        return f" (allowed: {ctx['expected']})"
    if err.get("type") == "extra_forbidden":
        return " (this field does not exist; check its spelling or see `coevolve config schema`)"
    return ""


def format_validation_error(source: str, e: ValidationError, prefix: str = "") -> str:
    lines = [f"{source}: the configuration is not valid:"]
    for err in e.errors():
        path = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(err["loc"]))
        got = err.get("input")
        shown = "" if err.get("type") in ("missing",) else f"; got {json.dumps(got, default=str)[:80]}"
        lines.append(f"  - {path}: {err['msg']}{_allowed(err)}{shown}")
    return "\n".join(lines)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read and validate a YAML run config. Raises ConfigError with a readable message."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such config file. Pass the path of a YAML file, e.g. examples/bfcl-tiny.yaml.")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        where = ""
        mark = getattr(e, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{p}: not valid YAML{where}: {problem}. Fix the syntax (indentation, colons, quotes) and run again.") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of settings (run_dir, environment, policy, ...), got {type(raw).__name__}.")
    for dotted, value in (overrides or {}).items():
        cur = raw
        parts = dotted.split(".")
        for part in parts[:-1]:
            cur = cur.setdefault(part, {})
        cur[parts[-1]] = value
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(str(p), e)) from None


def validate_components(cfg: RunConfig, registry: Any, source: str = "config") -> dict[str, Any]:
    """Resolve every named component and validate its options; returns the parsed options
    keyed by the config path (``policy``, ``detectors.0`` ...)."""
    slots: list[tuple[str, str, ComponentConfig]] = []
    for kind in KINDS:  # the one list of component kinds, with where a config names each
        value: Any = cfg
        for part in kind.config_path.split("."):
            value = getattr(value, part)
        if kind.many:
            slots += [(f"{kind.config_path}.{i}", kind.name, c) for i, c in enumerate(value)]
        else:
            slots.append((kind.config_path, kind.name, value))
    return {path: resolve_component(registry, kind, comp, path, source)[1] for path, kind, comp in slots}


def resolve_component(registry: Any, kind: str, comp: ComponentConfig, path: str, source: str = "config") -> tuple[type, Any]:
    """The class registered for ``comp`` and its options validated by the class's ``Options``
    model; a ConfigError names ``source`` and the config ``path`` (``detectors.1.name``, say)."""
    try:
        cls = registry.get(kind, comp.name)
    except PluginError as e:
        raise ConfigError(f"{source}: {path}.name: {e}") from None
    options_model = getattr(cls, "Options", None)
    if options_model is None:
        return cls, comp.options
    try:
        return cls, options_model.model_validate(comp.options)
    except ValidationError as e:
        raise ConfigError(format_validation_error(source, e, prefix=f"{path}.options")) from None


def config_schema() -> dict[str, Any]:
    return RunConfig.model_json_schema()
