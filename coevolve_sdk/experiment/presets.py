"""The paper's arms as presets: each is a set of dotted overrides computed from the base config.

A preset changes only what makes its arm that arm; everything else (model, algorithm,
teacher, rollout, steps, evaluation) comes from the base config, so arms differ in exactly the
keys listed here. An arm's own ``overrides`` are applied after its preset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coevolve_sdk.errors import ConfigError

__all__ = ["Preset", "PRESETS", "get_preset", "preset_names", "preset_overrides"]

#: An ablation arm is ``no-<detector>``: CoEvolve without one of the base config's detectors. The
#: names come from the base config (the detectors are plugins: the harness knows none of them).
ABLATION_PREFIX = "no-"


@dataclass(frozen=True)
class Preset:
    name: str
    differs: str  # one sentence: how this arm differs from the base config (shown in docs and summaries)
    overrides: Callable[[dict[str, Any]], dict[str, Any]]


def _detector_names(base: dict[str, Any]) -> list[str]:
    return [d.get("name") if isinstance(d, dict) else str(d) for d in (base.get("detectors") or [])]


def _coevolve(base: dict[str, Any]) -> dict[str, Any]:
    if not _detector_names(base):
        raise ConfigError(
            "preset 'coevolve' needs detectors: the base config lists none, so no signal would ever guide the teacher. "
            "Add e.g. `detectors: [{name: forgetting}, {name: boundary}, {name: rare}]` to the base config."
        )
    return {"evolution.enabled": True, "evolution.guidance": "signals"}


def _without(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def apply(base: dict[str, Any]) -> dict[str, Any]:
        names = _detector_names(base)
        if kind not in names:
            raise ConfigError(
                f"preset 'no-{kind}' drops the '{kind}' detector, but the base config's detectors are "
                f"{names or 'none'}. Add '{kind}' to the base config's detectors, or drop this arm."
            )
        kept = [d for d, n in zip(base.get("detectors") or [], names) if n != kind]
        if not kept:
            raise ConfigError(f"preset 'no-{kind}' would leave no detector at all; that arm is 'random-exploration' or 'static', not an ablation.")
        return {**_coevolve(base), "detectors": kept}

    return apply


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "zero-shot",
            "no training at all (training.steps=0, training.warm_start=false, evolution off): the initial policy "
            "evaluated once, phase 'before'.",
            lambda base: {"training.steps": 0, "training.warm_start": False, "evolution.enabled": False, "eval.before": True},
        ),
        Preset(
            "static",
            "GRPO on the seed pool D_0 only (evolution.enabled=false): same steps, tasks per step and group size, no "
            "teacher after the seed pool.",
            lambda base: {"evolution.enabled": False},
        ),
        Preset(
            "random-exploration",
            "evolution every F steps with the same teacher and admitted-task budget, but exploration starts from pool "
            "tasks drawn at random instead of from signals (evolution.guidance=random).",
            lambda base: {"evolution.enabled": True, "evolution.guidance": "random"},
        ),
        Preset(
            "coevolve",
            "the full method: evolution every F steps guided by the base config's detectors (evolution.guidance=signals).",
            _coevolve,
        ),
    ]
}


def _ablation(detector: str) -> Preset:
    return Preset(f"{ABLATION_PREFIX}{detector}",
                  f"coevolve without the '{detector}' detector (the base config's detector list minus '{detector}').",
                  _without(detector))


def is_preset_name(name: str) -> bool:
    """A fixed preset, or ``no-<detector>`` (checked against the base config when applied)."""
    return name in PRESETS or (name.startswith(ABLATION_PREFIX) and len(name) > len(ABLATION_PREFIX))


def get_preset(name: str) -> Preset:
    """The preset called ``name``: one of ``PRESETS`` or the ablation ``no-<detector>``."""
    if name in PRESETS:
        return PRESETS[name]
    if is_preset_name(name):
        return _ablation(name[len(ABLATION_PREFIX):])
    raise ConfigError(f"no preset '{name}'; the presets are {', '.join(PRESETS)} and no-<detector> for each detector "
                      f"of the base config.")


def preset_names(base: dict[str, Any]) -> list[str]:
    """Every arm the presets offer for this base config: the fixed ones, then one ablation per detector."""
    return [*PRESETS, *(f"{ABLATION_PREFIX}{d}" for d in _detector_names(base) if d)]


def preset_overrides(name: str, base: dict[str, Any]) -> dict[str, Any]:
    """The dotted overrides of preset ``name`` for this base config (ConfigError if it cannot apply)."""
    return get_preset(name).overrides(base)
