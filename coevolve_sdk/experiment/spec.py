"""The experiment file: a base run config, arms (presets and overrides), seeds, metric, baseline.

Loading resolves every arm × seed into a validated ``RunConfig`` before anything runs, so a
typo in the twentieth run's overrides is an error with a field path now, not a crash an hour
in. It also refuses experiments whose comparison would be unfair: training arms with different
compute, or arms evaluated on different held-out tasks.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coevolve_sdk.config import RunConfig, format_validation_error, validate_components
from coevolve_sdk.errors import ConfigError
from coevolve_sdk.experiment.presets import PRESETS, get_preset, is_preset_name, preset_overrides

__all__ = ["ExperimentSpec", "ArmSpec", "MetricSpec", "Experiment", "ArmPlan", "load_experiment", "set_dotted", "flatten"]

ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
RESERVED_KEYS = ("seed", "run_dir")  # the experiment sets these for every run


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _override_keys(v: dict[str, Any]) -> dict[str, Any]:
    for key in v:
        if key in RESERVED_KEYS:
            raise ValueError(f"'{key}' is set by the experiment for every run (seeds: and the experiment folder); remove it here")
        if not key or any(not part for part in key.split(".")):
            raise ValueError(f"'{key}' is not a dotted config key (e.g. evolution.every)")
    return v


class MetricSpec(_Strict):
    """What is compared between arms: one number per run, read from its evaluation rows."""

    key: Literal["success_rate", "mean_score"] = Field("success_rate", description="Column of the evaluation row.")
    phase: Literal["final", "before", "after"] = Field(
        "final", description="final: the 'after' row of a training arm, the 'before' row of an arm that does not train."
    )


class ArmSpec(_Strict):
    name: str = Field(pattern=ARM_NAME, description="Folder-safe name: letters, digits, '.', '_', '-', starting with a letter or digit.")
    preset: str | None = Field(None, description="One of the presets: zero-shot, static, random-exploration, coevolve, or no-<detector> (an ablation).")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Dotted keys of the run config, as with `coevolve run --set`.")
    description: str = ""
    unequal_compute: bool = Field(False, description="Allow this training arm a different compute budget than the others.")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        if v is not None and not is_preset_name(v):
            raise ValueError(f"unknown preset '{v}'; the presets are: {', '.join(PRESETS)} and no-<detector> for each "
                             f"detector of the base config")
        return v

    @field_validator("overrides")
    @classmethod
    def _keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _override_keys(v)


class ExperimentSpec(_Strict):
    """An experiment file (YAML). ``base`` is relative to the experiment file; ``dir`` to the
    working directory, like a run config's ``run_dir``."""

    base: str = Field(description="The base run config, relative to this file.")
    base_overrides: dict[str, Any] = Field(
        default_factory=dict, description="Dotted overrides applied to the base config for every arm, before presets (e.g. eval.every)."
    )
    dir: str | None = Field(None, description="Experiment folder (default: runs/experiments/<file name>); --dir overrides.")
    seeds: list[int] = Field(min_length=1, description="Each arm runs once per seed (the run config's `seed`).")
    arms: list[ArmSpec] = Field(min_length=1)
    baseline: str | None = Field(None, description="Arm that paired differences are taken against.")
    comparisons: list[tuple[str, str]] = Field(
        default_factory=list,
        description="More paired differences, each [arm, against] (e.g. [coevolve, random-exploration]): reported beside "
                    "those against the baseline, in summary.json (paired_vs), summary.md and the printed table.",
    )
    metric: MetricSpec = Field(default_factory=MetricSpec)
    description: str = ""

    @field_validator("base_overrides")
    @classmethod
    def _keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _override_keys(v)

    @field_validator("comparisons", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        for item in v if isinstance(v, list) else []:
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise ValueError(f"each entry is a pair [arm, against], e.g. [coevolve, random-exploration]; got {item!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "ExperimentSpec":
        dup_seeds = sorted({s for s in self.seeds if self.seeds.count(s) > 1})
        if dup_seeds:
            raise ValueError(f"seeds: {dup_seeds} appear more than once; list each seed once")
        names = [a.name for a in self.arms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"arms: the names {dup} appear more than once; every arm needs its own name (it is its folder)")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline: '{self.baseline}' is not an arm; the arms are {names}")
        for arm, against in self.comparisons:
            unknown = [n for n in (arm, against) if n not in names]
            if unknown:
                raise ValueError(f"comparisons: {unknown} {'is' if len(unknown) == 1 else 'are'} not an arm; the arms are {names}")
            if arm == against:
                raise ValueError(f"comparisons: [{arm}, {against}] compares an arm with itself; name two different arms")
        return self


def set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested config mapping, creating mappings on the way like ``--set``;
    a number steps into a list (``detectors.0.options.window``)."""
    parts = key.split(".")
    cur: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                raise ConfigError(f"'{key}': '{'.'.join(parts[:i]) or key}' is a list of {len(cur)} items; '{part}' is not an index of it")
            if last:
                cur[int(part)] = value
            else:
                cur = cur[int(part)]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                nxt = cur.get(part)
                if nxt is None:
                    nxt = cur[part] = {}
                cur = nxt
        else:
            raise ConfigError(f"'{key}': '{'.'.join(parts[:i])}' holds a value ({json.dumps(cur, default=str)[:40]}), not settings to step into at '{where}'")


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (lists stay values), for diffs a person can read."""
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


@dataclass
class ArmPlan:
    """One arm, resolved: its overrides in the order applied and its config for any seed."""

    name: str
    preset: str | None
    description: str
    unequal_compute: bool
    preset_overrides: dict[str, Any]
    own_overrides: dict[str, Any]
    raw: dict[str, Any]  # base + overrides, before seed and run_dir
    template: RunConfig

    @property
    def trains(self) -> bool:
        return self.template.training.steps > 0

    @property
    def rollouts(self) -> int:
        """Training compute: steps × tasks per step × group size (trajectories generated and learnt from)."""
        t = self.template
        return t.training.steps * t.training.tasks_per_step * t.rollout.group_size

    @property
    def metric_phase(self) -> str:
        return "after" if self.trains else "before"


@dataclass
class Experiment:
    source: Path
    spec: ExperimentSpec
    base_path: Path
    base_raw: dict[str, Any]
    out: Path
    arms: list[ArmPlan]
    checks: dict[str, Any] = field(default_factory=dict)

    def run_dir(self, arm: str, seed: int) -> Path:
        return self.out / "runs" / arm / f"seed-{seed}"

    def config(self, arm: ArmPlan, seed: int) -> RunConfig:
        return arm.template.model_copy(update={"seed": seed, "run_dir": str(self.run_dir(arm.name, seed))}, deep=True)

    def phase_of(self, arm: ArmPlan) -> str:
        return arm.metric_phase if self.spec.metric.phase == "final" else self.spec.metric.phase

    def arm(self, name: str) -> ArmPlan:
        return next(a for a in self.arms if a.name == name)


def _read_yaml(path: Path, what: str) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{path}: no such {what}.")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or e}. Fix the syntax and run again.") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level of a {what} must be a mapping, got {type(raw).__name__}.")
    return raw


def _resolve_arm(source: Path, base_raw: dict[str, Any], i: int, arm: ArmSpec) -> ArmPlan:
    where = f"{source}: arms.{i} ('{arm.name}')"
    try:
        from_preset = preset_overrides(arm.preset, base_raw) if arm.preset else {}
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    raw = copy.deepcopy(base_raw)
    raw.pop("run_dir", None)
    for key, value in [*from_preset.items(), *arm.overrides.items()]:
        try:
            set_dotted(raw, key, copy.deepcopy(value))
        except ConfigError as e:
            raise ConfigError(f"{where}: overrides: {e}") from None
    try:
        template = RunConfig.model_validate({**raw, "run_dir": "unset", "seed": 0})
    except ValidationError as e:
        raise ConfigError(format_validation_error(f"{where}, base config + preset + overrides", e)) from None
    return ArmPlan(arm.name, arm.preset, arm.description, arm.unequal_compute, from_preset, dict(arm.overrides), raw, template)


def _check_metric(source: Path, spec: ExperimentSpec, arms: list[ArmPlan]) -> None:
    for a in arms:
        phase = a.metric_phase if spec.metric.phase == "final" else spec.metric.phase
        if phase == "after" and not a.trains:
            raise ConfigError(f"{source}: metric.phase is 'after' but arm '{a.name}' does not train (training.steps=0): it has no 'after' evaluation. Use phase: final.")
        if not getattr(a.template.eval, phase):
            raise ConfigError(f"{source}: arm '{a.name}' is compared on its '{phase}' evaluation but its config sets eval.{phase}: false. Remove that setting.")
    evals = {a.name: (a.template.eval.split, a.template.eval.max_tasks) for a in arms}
    if len(set(evals.values())) > 1:
        shown = ", ".join(f"{n}: split={s}, max_tasks={m}" for n, (s, m) in evals.items())
        raise ConfigError(f"{source}: arms are evaluated on different held-out tasks ({shown}); set eval.split and eval.max_tasks in the base config only.")


def _check_compute(source: Path, arms: list[ArmPlan]) -> dict[str, Any]:
    per_arm = {
        a.name: {"steps": a.template.training.steps, "tasks_per_step": a.template.training.tasks_per_step,
                 "group_size": a.template.rollout.group_size, "rollouts": a.rollouts,
                 "warm_start": a.template.training.warm_start, "exempt": a.unequal_compute}
        for a in arms if a.trains
    }
    checked = {n: v for n, v in per_arm.items() if not v["exempt"]}
    budgets = {(v["rollouts"], v["warm_start"]) for v in checked.values()}
    if len(budgets) > 1:
        shown = "; ".join(
            f"{n}: {v['steps']} steps × {v['tasks_per_step']} tasks × group {v['group_size']} = {v['rollouts']} rollouts, warm start {'on' if v['warm_start'] else 'off'}"
            for n, v in checked.items()
        )
        raise ConfigError(
            f"{source}: the training arms differ in compute ({shown}). A comparison is fair only at equal compute: make "
            f"training.steps × training.tasks_per_step × rollout.group_size and training.warm_start the same, or mark "
            f"an arm `unequal_compute: true` if the difference is the point."
        )
    exempt = [n for n, v in per_arm.items() if v["exempt"]]
    note = (f"equal in every training arm: {next(iter(checked.values()))['rollouts']} rollouts" if checked else "no training arm")
    if exempt:
        note += f"; exempt (unequal_compute): {', '.join(exempt)}"
    return {"equal": True, "per_arm": per_arm, "note": note}


def _check_teacher(arms: list[ArmPlan]) -> dict[str, Any]:
    """Whether each signal-guided arm gets the teacher budget of each random-exploration arm.

    The comparison that needs it is guided against random, pair by pair: an experiment that adds a
    guided variant with other teacher options leaves the coevolve-vs-random pair fair, so the note
    names the pairs that differ and in which settings instead of calling the whole file unequal."""
    evolving = [a for a in arms if a.trains and a.template.evolution.enabled]
    per_arm = {
        a.name: {"guidance": a.template.evolution.guidance, "teacher": a.template.teacher.model_dump(mode="json"),
                 "every": a.template.evolution.every, "max_admitted_per_round": a.template.evolution.max_admitted_per_round,
                 "admission_probe": a.template.evolution.admission_probe}
        for a in evolving
    }
    kinds = {v["guidance"] for v in per_arm.values()}
    if not ({"random", "signals"} <= kinds):
        return {"equal": None, "per_arm": per_arm, "note": "no random-exploration arm next to a signal-guided arm: nothing to compare"}
    keys = ("teacher", "every", "max_admitted_per_round", "admission_probe")
    flat = {name: {k: x for k, x in flatten({k: v[k] for k in keys}).items() if x != {}}  # no options = empty options
            for name, v in per_arm.items()}
    pairs: dict[str, dict[str, Any]] = {}
    for g in (n for n, v in per_arm.items() if v["guidance"] == "signals"):
        for r in (n for n, v in per_arm.items() if v["guidance"] == "random"):
            differs = sorted(k for k in flat[g].keys() | flat[r].keys() if flat[g].get(k) != flat[r].get(k))
            pairs[f"{g} vs {r}"] = {"guided": g, "random": r, "equal": not differs, "differs": differs}
    equal = all(p["equal"] for p in pairs.values())
    budgets = {v["max_admitted_per_round"] for v in per_arm.values()}
    fair = [k for k, p in pairs.items() if p["equal"]]
    unfair = [f"{k} (in {', '.join(p['differs'])})" for k, p in pairs.items() if not p["equal"]]
    if not equal:
        note = ("not the same teacher budget for " + "; ".join(unfair) + ": those pairs differ in teacher, evolution.every, "
                "evolution.max_admitted_per_round or evolution.admission_probe"
                + (f"; the same for {', '.join(fair)}" if fair else ""))
    elif budgets == {None}:
        note = ("same teacher and evolution.every, but no evolution.max_admitted_per_round: the arms may admit different numbers "
                "of tasks per round (see admitted per round)")
    else:
        note = f"same teacher, evolution.every and admitted-task budget ({budgets.pop()} per round) in every evolving arm"
    return {"equal": equal, "budget_set": None not in budgets, "per_arm": per_arm, "pairs": pairs, "note": note}


def _check_environment(arms: list[ArmPlan]) -> dict[str, Any]:
    envs = {a.name: a.template.environment.model_dump(mode="json") for a in arms}
    same = len({json.dumps(e, sort_keys=True) for e in envs.values()}) == 1
    return {"equal": same, "note": "same environment and options in every arm" if same else
            "the arms' environments differ: their held-out tasks may differ too, so compare with care"}


def load_experiment(path: str | Path, out_dir: str | Path | None = None, check_components: bool = True) -> Experiment:
    """Read, resolve and check an experiment file. Raises ConfigError with a readable message."""
    source = Path(path)
    raw = _read_yaml(source, "experiment file")
    try:
        spec = ExperimentSpec.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(str(source), e).replace("the configuration is not valid", "the experiment file is not valid")) from None
    base_path = (source.parent / spec.base).resolve()
    base_raw = _read_yaml(base_path, f"base run config (base: {spec.base} in {source}; paths are relative to the experiment file)")
    for key, value in spec.base_overrides.items():
        try:
            set_dotted(base_raw, key, copy.deepcopy(value))
        except ConfigError as e:
            raise ConfigError(f"{source}: base_overrides: {e}") from None
    arms = [_resolve_arm(source, base_raw, i, a) for i, a in enumerate(spec.arms)]
    if check_components:
        from coevolve_sdk.components.registry import get_registry

        reg = get_registry()
        for a in arms:
            for module in a.template.plugins:
                reg.add_module(module)
            validate_components(a.template, reg, source=f"{source}: arm '{a.name}'")
    _check_metric(source, spec, arms)
    checks = {"compute": _check_compute(source, arms), "teacher_budget": _check_teacher(arms), "environment": _check_environment(arms)}
    out = Path(out_dir) if out_dir is not None else Path(spec.dir or f"runs/experiments/{source.stem}")
    return Experiment(source.resolve(), spec, base_path, base_raw, out.resolve(), arms, checks)


def differences(base: RunConfig, arm: RunConfig) -> dict[str, dict[str, Any]]:
    """Every dotted key whose value differs between two configs (run_dir and seed aside)."""
    a, b = flatten(base.model_dump(mode="json")), flatten(arm.model_dump(mode="json"))
    return {k: {"base": a.get(k), "arm": b.get(k)} for k in sorted(set(a) | set(b))
            if k not in RESERVED_KEYS and a.get(k) != b.get(k)}


def plan_record(exp: Experiment) -> dict[str, Any]:
    """The resolved experiment as JSON (written to ``OUT/experiment.json``): what the summary
    needs to aggregate the run folders again without the experiment file."""
    try:
        base_cfg: RunConfig | None = RunConfig.model_validate({**exp.base_raw, "run_dir": "unset", "seed": 0})
    except ValidationError:
        base_cfg = None
    arms = []
    for a in exp.arms:
        arms.append({
            "name": a.name, "preset": a.preset, "description": a.description,
            "differs": get_preset(a.preset).differs if a.preset else "",
            "preset_overrides": a.preset_overrides, "overrides": a.own_overrides,
            "changes": differences(base_cfg, a.template) if base_cfg is not None else {},
            "trains": a.trains, "metric_phase": exp.phase_of(a), "rollouts": a.rollouts,
            "eval_every": a.template.eval.every, "steps": a.template.training.steps,
        })
    return {
        "source": str(exp.source), "base": str(exp.base_path), "out": str(exp.out), "description": exp.spec.description,
        "seeds": exp.spec.seeds, "baseline": exp.spec.baseline, "comparisons": [list(c) for c in exp.spec.comparisons],
        "metric": exp.spec.metric.model_dump(),
        "split": exp.arms[0].template.eval.split, "arms": arms, "checks": exp.checks,
    }
