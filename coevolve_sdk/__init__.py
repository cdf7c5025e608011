"""CoEvolve SDK: train LLM tool-use agents with RL while their task pool evolves with them.

Importing the package stays light (no torch, transformers, litellm or vllm): heavy components
live in plugins and import what they need when they are built.
"""

from __future__ import annotations

from .algorithm import Algorithm
from .environment import AgentEnv, EnvOptions, Outcome, ReplayResult
from .hooks import hookimpl
from .policy import Generation, Policy
from .signals import CompetenceHistory, SignalDetector
from .teacher import RandomExplorer, Teacher
from .types import (
    CandidateTask,
    ExplorationContext,
    Lineage,
    RolloutGroup,
    Signal,
    Step,
    Task,
    TeacherUsage,
    ToolSpec,
    Trajectory,
    Triplet,
    Verdict,
)

__version__ = "0.1.0"

__all__ = [
    "AgentEnv", "EnvOptions", "Outcome", "ReplayResult", "Algorithm", "Policy", "Generation",
    "SignalDetector", "CompetenceHistory", "Teacher", "RandomExplorer", "hookimpl",
    "CandidateTask", "ExplorationContext", "Lineage", "RolloutGroup", "Signal", "Step", "Task",
    "TeacherUsage", "ToolSpec", "Trajectory", "Triplet", "Verdict", "register_gym_envs",
]


def register_gym_envs() -> list[str]:
    """Register every installed environment with gymnasium; returns the ids."""
    from .registry import get_registry

    return get_registry().register_gym_envs()


def _auto_register() -> None:
    # gymnasium has no plugin discovery of its own: registering here makes
    # ``import coevolve_sdk; gymnasium.make("coevolve/<name>-v0")`` work for every installed plugin.
    try:
        register_gym_envs()
    except Exception as e:  # never let a broken plugin break `import coevolve_sdk`
        import warnings

        warnings.warn(f"coevolve_sdk: could not register environments with gymnasium: {e}", stacklevel=2)


_auto_register()
