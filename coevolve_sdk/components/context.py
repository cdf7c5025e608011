"""RunContext: what a component may use while it is built and while it runs.

Components are constructed as ``Component(options, context)`` (see ``components.base.Component``).
The context is the one door to the rest of the run, so a plugin never has to import the loop or
reach for globals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from coevolve_sdk.env.base import AgentEnv
    from coevolve_sdk.training.policy import Policy


@dataclass
class RunContext:
    """Handed to every component as it is built: the run folder, the run's seed (draw every
    random number from it), a factory for fresh environment instances, the policy (for an
    algorithm), and where to report (``log`` for a line, ``progress`` for long work)."""

    run_dir: Path
    seed: int = 0
    make_env: Callable[[], "AgentEnv"] | None = None
    policy: "Policy | None" = None
    log: Callable[[str], None] = print
    #: ``progress(what, done, total)``: components report long work (a warm start, say) here;
    #: the CLI shows it as a progress bar on a terminal and as occasional lines elsewhere
    progress: Callable[[str, int, int], None] = lambda what, done, total: None

    def new_env(self) -> "AgentEnv":
        if self.make_env is None:
            raise RuntimeError("this run context has no environment factory")
        return self.make_env()
