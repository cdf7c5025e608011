"""The core's default components, registered through the same hooks as any plugin.

(Named ``defaults`` rather than ``builtins``, which would shadow the standard module of that
name inside the package.)
"""

from __future__ import annotations

from coevolve_sdk.components.hooks import hookimpl


@hookimpl
def register_teachers() -> list[type]:
    # the LLM teacher is the plugin coevolve-litellm; the core keeps the offline one
    from coevolve_sdk.evolution.teacher import RandomExplorer

    return [RandomExplorer]


@hookimpl
def register_task_samplers() -> list[type]:
    from coevolve_sdk.evolution.pool import FrontierSampler, SyntheticShareSampler, UniformSampler

    return [UniformSampler, SyntheticShareSampler, FrontierSampler]
