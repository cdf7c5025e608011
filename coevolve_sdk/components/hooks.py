"""The plugin hooks of CoEvolve.

Two families. *Registration* hooks return lists of component classes; every plugin's lists are
concatenated, and the core's own defaults arrive through the same hooks. *Lifecycle* hooks
observe the run as it goes; they receive a read-only ``RunView`` of it (never the loop itself,
which they could change by accident, and which evolution worker threads share), their return
values are ignored, and an exception in one is reported with the plugin's name and stops the
run (a silent observer is worse than none).

Every hook is documented in ``docs/plugins/hooks.md``; a test checks that page against the
signatures below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from coevolve_sdk.run.view import RunView
    from coevolve_sdk.records import CandidateTask, RolloutGroup, Signal, Task

PROJECT = "coevolve"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------- registration hooks
@hookspec
def register_environments() -> list[type]:
    """Return ``AgentEnv`` subclasses. Each must set a unique ``name``."""


@hookspec
def register_signal_detectors() -> list[type]:
    """Return ``SignalDetector`` subclasses. Each must set ``name`` and ``kind``."""


@hookspec
def register_teachers() -> list[type]:
    """Return ``Teacher`` subclasses."""


@hookspec
def register_policies() -> list[type]:
    """Return ``Policy`` subclasses (rollout engines)."""


@hookspec
def register_algorithms() -> list[type]:
    """Return ``Algorithm`` subclasses (optimisers of the policy)."""


@hookspec
def register_task_samplers() -> list[type]:
    """Return ``TaskSampler`` subclasses that choose each step's tasks from the pool."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add sub-commands to the ``coevolve`` command; ``cli`` is its ``typer.Typer`` app."""


# ---------------------------------------------------------------- lifecycle hooks
@hookspec
def on_rollouts_collected(run: RunView, step: int, groups: list[RolloutGroup]) -> None:
    """After every step's rollouts, on the main process, before the optimisation step."""


@hookspec
def on_signals_detected(run: RunView, step: int, signals: list[Signal]) -> None:
    """After the detectors have read a step's groups; ``signals`` may be empty."""


@hookspec
def on_tasks_proposed(run: RunView, step: int, candidates: list[CandidateTask]) -> None:
    """When a teacher has proposed candidates for one signal, before validation (from an
    evolution worker thread)."""


@hookspec
def on_tasks_admitted(run: RunView, step: int, tasks: list[Task]) -> None:
    """After validated tasks have been written to the pool."""


@hookspec
def on_step_end(run: RunView, step: int, metrics: dict[str, float]) -> None:
    """After a training step is finished and its metrics are stored."""
