"""The names of a step's metrics: one namespace per source, so that no source overwrites another.

Before namespaces, the loop's ``reward_mean`` was silently replaced by GRPO's own ``reward_mean``
(issue 14). Now every metric name says where it comes from:

=====================  ============================================================
``rollout/``           the loop, from the step's rollouts (reward, success, turns, tokens)
``algo/``              what ``Algorithm.step`` returned, whatever its own names
``policy/``            what ``Policy.after_update`` returned (a weight sync, say)
``signals/<kind>``     signals detected in the step, per kind
``pool/``              the pool's size and its tasks per origin after the step
``evolution/``         tasks admitted, candidates proposed, teacher seconds of admitted rounds
``judge/``             the teacher's judge on training rollouts (``judge_rollouts: confirm``)
``time/``              wall time of each phase of the step
``warm_start/``        the warm start's own metrics (step 0)
=====================  ============================================================

Readers of run folders written before namespaces look a loop metric up with
``progress.metric(metrics, "rollout/reward_mean")``, which falls back to the bare name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coevolve_sdk.evolution.scheduler import Admission
    from coevolve_sdk.records import Signal, Trajectory

__all__ = ["metric", "namespaced", "rollout_metrics", "step_metrics", "evolution_metrics"]


def metric(metrics: dict[str, float], name: str, default: float = 0.0) -> float:
    """A loop metric by its namespaced name (``rollout/reward_mean``), or by the bare name run
    folders written before metric namespaces used (``reward_mean``)."""
    if name in metrics:
        return metrics[name]
    return metrics.get(name.split("/", 1)[-1], default)


def namespaced(prefix: str, metrics: dict[str, Any] | None) -> dict[str, float]:
    return {f"{prefix}/{k}": float(v) for k, v in (metrics or {}).items()}


def rollout_metrics(trajs: list["Trajectory"]) -> dict[str, float]:
    n = max(1, len(trajs))
    return {
        "rollout/reward_mean": sum(tr.score for tr in trajs) / n,
        "rollout/success_rate": sum(1.0 for tr in trajs if tr.success) / n,
        "rollout/episode_turns": sum(float(tr.info.get("turns", 0)) for tr in trajs) / n,
        "rollout/generated_tokens": float(sum(tr.info.get("generated_tokens", 0) for tr in trajs)),
    }


def evolution_metrics(admissions: list["Admission"], into: dict[str, float]) -> None:
    """Add the rounds admitted at a boundary to the step's metrics (``time/evolution_wait``:
    how long the step waited for a background round that was not done)."""
    for a in admissions:
        for key, value in (("evolution/admitted", len(a.admitted)), ("evolution/candidates", a.result.candidates),
                           ("evolution/seconds", a.result.seconds), ("time/evolution_wait", a.waited)) + (
                (("evolution/probe_rollouts", a.result.probe_rollouts), ("evolution/probe_too_easy", a.result.too_easy),
                 ("evolution/probe_too_hard", a.result.too_hard)) if a.result.probed else ()):
            into[key] = into.get(key, 0.0) + float(value)


def step_metrics(trajs: list["Trajectory"], signals: list["Signal"], detector_kinds: list[str], pool_counts: dict[str, int]) -> dict[str, float]:
    """The loop's record of a finished step: its rollouts, its signals per kind (every
    detector's kind, zero included) and the pool after it."""
    out = rollout_metrics(trajs)
    for kind in sorted(set(detector_kinds) | {s.kind for s in signals}):
        out[f"signals/{kind}"] = float(sum(1 for s in signals if s.kind == kind))
    out.update({f"pool/{origin}": float(n) for origin, n in pool_counts.items()})
    out["pool/size"] = float(sum(pool_counts.values()))
    return out
