"""The core's own components, registered through the same hooks as any plugin."""

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
    from .pool import SyntheticFirstSampler, UniformSampler

    return [UniformSampler, SyntheticFirstSampler]
