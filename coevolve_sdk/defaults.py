"""The core's default components, registered through the same hooks as any plugin.

(Named ``defaults`` rather than ``builtins``, which would shadow the standard module of that
name inside the package.)
"""

from __future__ import annotations

from .hooks import hookimpl


@hookimpl
def register_teachers() -> list[type]:
    from .teacher import RandomExplorer

    teachers: list[type] = [RandomExplorer]
    try:
        from .llm_teacher import LiteLLMTeacher
    except ImportError:  # the module is optional until the llm extra lands
        pass
    else:
        teachers.append(LiteLLMTeacher)
    return teachers


@hookimpl
def register_task_samplers() -> list[type]:
    from .pool import SyntheticShareSampler, UniformSampler

    return [UniformSampler, SyntheticShareSampler]
