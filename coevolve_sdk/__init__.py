"""CoEvolve SDK: train LLM tool-use agents with RL while their task pool evolves with them.

This module is the SDK's front door. Every name a plugin, an example or a user's script needs is
exported here, and only these names are public: the subpackages (``env``, ``training``,
``evolution``, ``storage``, ``run``, ``components``, ``cli``, ``experiment``) are the SDK's own
rooms and may be rearranged between releases. ``tests/architecture/test_front_door.py`` keeps
the plugins and examples of this repository to this rule.

Importing the package stays light (no torch, transformers, litellm or vllm): the names resolve
on first use (PEP 562), so ``from coevolve_sdk import hookimpl`` in a plugin does not load the
training loop, and heavy components live in plugins that import what they need when built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevolve_sdk.lazy import lazy_exports

__version__ = "0.1.0"

# public name -> the module that defines it. Grouped as the documentation presents them.
_EXPORTS: dict[str, str] = {
    # writing a plugin: the hook marker and what every component receives
    "hookimpl": "coevolve_sdk.components.hooks",
    "lazy_exports": "coevolve_sdk.lazy",
    "RunContext": "coevolve_sdk.components.context",
    "Registry": "coevolve_sdk.components.registry",
    "get_registry": "coevolve_sdk.components.registry",
    # environments
    "AgentEnv": "coevolve_sdk.env.base",
    "EnvOptions": "coevolve_sdk.env.base",
    "Outcome": "coevolve_sdk.env.base",
    "ReplayResult": "coevolve_sdk.env.base",
    "ToolEnv": "coevolve_sdk.env.toolenv",
    "ToolEnvOptions": "coevolve_sdk.env.toolenv",
    "ToolError": "coevolve_sdk.env.tools",
    "tool": "coevolve_sdk.env.tools",
    "from_state": "coevolve_sdk.env.tools",
    "call": "coevolve_sdk.env.tools",
    "Rubric": "coevolve_sdk.env.rubric",
    "Check": "coevolve_sdk.env.rubric",
    "answer_matches": "coevolve_sdk.env.rubric",
    "state_matches": "coevolve_sdk.env.rubric",
    "ToolCall": "coevolve_sdk.env.actions",
    "ActionParseError": "coevolve_sdk.env.actions",
    "format_tool_call": "coevolve_sdk.env.actions",
    "parse_tool_calls": "coevolve_sdk.env.actions",
    "calls_in": "coevolve_sdk.env.actions",
    "MAX_ACTION_CHARS": "coevolve_sdk.env.actions",
    "check_env": "coevolve_sdk.authoring.check",
    "EnvCheckError": "coevolve_sdk.authoring.check",
    # policies, algorithms, rollouts
    "Policy": "coevolve_sdk.training.policy",
    "TrainablePolicy": "coevolve_sdk.training.policy",
    "Generation": "coevolve_sdk.training.policy",
    "Algorithm": "coevolve_sdk.training.algorithm",
    "CheckpointError": "coevolve_sdk.training.algorithm",
    "CheckpointMismatch": "coevolve_sdk.training.algorithm",
    "policy_dir": "coevolve_sdk.training.algorithm",
    "find_policy_dir": "coevolve_sdk.training.algorithm",
    "AlgorithmOptions": "coevolve_sdk.training.algorithm",
    "Processes": "coevolve_sdk.training.processes",
    "EnvPool": "coevolve_sdk.training.rollout",
    "collect_groups": "coevolve_sdk.training.rollout",
    # signals, teachers, the task pool
    "SignalDetector": "coevolve_sdk.evolution.signals",
    "CompetenceHistory": "coevolve_sdk.evolution.signals",
    "Teacher": "coevolve_sdk.evolution.teacher",
    "TeacherOptions": "coevolve_sdk.evolution.teacher",
    "RandomExplorer": "coevolve_sdk.evolution.teacher",
    "record_usage": "coevolve_sdk.evolution.teacher",
    "usage_meter": "coevolve_sdk.evolution.teacher",
    "Validator": "coevolve_sdk.evolution.validation",
    "EVAL_REQUEST_REASON": "coevolve_sdk.evolution.validation",
    "TaskPool": "coevolve_sdk.evolution.pool",
    "UniformSampler": "coevolve_sdk.evolution.pool",
    "SyntheticShareSampler": "coevolve_sdk.evolution.pool",
    "FrontierSampler": "coevolve_sdk.evolution.pool",
    "TaskSampler": "coevolve_sdk.evolution.pool",
    # records
    "CandidateTask": "coevolve_sdk.records",
    "ExplorationContext": "coevolve_sdk.records",
    "Lineage": "coevolve_sdk.records",
    "RolloutGroup": "coevolve_sdk.records",
    "Signal": "coevolve_sdk.records",
    "Step": "coevolve_sdk.records",
    "Task": "coevolve_sdk.records",
    "TeacherStages": "coevolve_sdk.records",
    "TeacherUsage": "coevolve_sdk.records",
    "ToolSpec": "coevolve_sdk.records",
    "Trajectory": "coevolve_sdk.records",
    "Triplet": "coevolve_sdk.records",
    "Verdict": "coevolve_sdk.records",
    # errors
    "CoEvolveError": "coevolve_sdk.errors",
    "ConfigError": "coevolve_sdk.errors",
    "BudgetExhausted": "coevolve_sdk.errors",
    "ComponentError": "coevolve_sdk.components.blame",
    "GraderError": "coevolve_sdk.env.contract",
    # running from Python
    "RunConfig": "coevolve_sdk.config",
    "RolloutConfig": "coevolve_sdk.config",
    "ValidationConfig": "coevolve_sdk.config",
    "CoEvolveLoop": "coevolve_sdk.run.loop",
    "evaluate_run": "coevolve_sdk.run.evaluation",
    "RunStore": "coevolve_sdk.storage.store",
    "machine_facts": "coevolve_sdk.storage.machine",
    "paired_difference": "coevolve_sdk.experiment.stats",
    "seeds_for_power": "coevolve_sdk.experiment.stats",
}

__all__ = sorted([*_EXPORTS, "register_gym_envs", "__version__"])


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # what type checkers and IDEs see; the runtime resolves lazily above
    from coevolve_sdk.components.context import RunContext
    from coevolve_sdk.components.hooks import hookimpl
    from coevolve_sdk.lazy import lazy_exports
    from coevolve_sdk.components.registry import Registry, get_registry
    from coevolve_sdk.config import RolloutConfig, RunConfig, ValidationConfig
    from coevolve_sdk.env.actions import MAX_ACTION_CHARS, ActionParseError, ToolCall, calls_in, format_tool_call, parse_tool_calls
    from coevolve_sdk.env.base import AgentEnv, EnvOptions, Outcome, ReplayResult
    from coevolve_sdk.authoring.check import EnvCheckError, check_env
    from coevolve_sdk.env.rubric import Check, Rubric, answer_matches, state_matches
    from coevolve_sdk.env.toolenv import ToolEnv, ToolEnvOptions
    from coevolve_sdk.env.tools import ToolError, call, from_state, tool
    from coevolve_sdk.components.blame import ComponentError
    from coevolve_sdk.env.contract import GraderError
    from coevolve_sdk.errors import BudgetExhausted, CoEvolveError, ConfigError
    from coevolve_sdk.evolution.pool import FrontierSampler, SyntheticShareSampler, TaskPool, TaskSampler, UniformSampler
    from coevolve_sdk.evolution.signals import CompetenceHistory, SignalDetector
    from coevolve_sdk.evolution.teacher import RandomExplorer, Teacher, TeacherOptions, record_usage, usage_meter
    from coevolve_sdk.evolution.validation import EVAL_REQUEST_REASON, Validator
    from coevolve_sdk.records import (
        CandidateTask, ExplorationContext, Lineage, RolloutGroup, Signal, Step, Task, TeacherStages, TeacherUsage, ToolSpec,
        Trajectory, Triplet, Verdict,
    )
    from coevolve_sdk.run.evaluation import evaluate_run
    from coevolve_sdk.run.loop import CoEvolveLoop
    from coevolve_sdk.experiment.stats import paired_difference, seeds_for_power
    from coevolve_sdk.storage.machine import machine_facts
    from coevolve_sdk.storage.store import RunStore
    from coevolve_sdk.training.algorithm import (
        Algorithm, AlgorithmOptions, CheckpointError, CheckpointMismatch, find_policy_dir, policy_dir,
    )
    from coevolve_sdk.training.policy import Generation, Policy, TrainablePolicy
    from coevolve_sdk.training.processes import Processes
    from coevolve_sdk.training.rollout import EnvPool, collect_groups


def register_gym_envs() -> list[str]:
    """Register every installed environment with gymnasium; returns the ids."""
    from coevolve_sdk.components.registry import get_registry as _get_registry

    return _get_registry().register_gym_envs()


def _auto_register() -> None:
    # gymnasium has no plugin discovery of its own: registering here makes
    # ``import coevolve_sdk; gymnasium.make("coevolve/<name>-v0")`` work for every installed plugin.
    try:
        register_gym_envs()
    except Exception as e:  # never let a broken plugin break `import coevolve_sdk`
        import warnings

        warnings.warn(f"coevolve_sdk: could not register environments with gymnasium: {e}", stacklevel=2)


_auto_register()
