"""Registers the ``litellm`` teacher with CoEvolve.

Imported by the core's registry at start-up for every installed plugin, so it imports nothing
heavy: the teacher's modules load when the registry asks for the class, and litellm itself only
when the teacher sends its first request.
"""

from __future__ import annotations

from coevolve_sdk import hookimpl


@hookimpl
def register_teachers() -> list[type]:
    from .teacher import LiteLLMTeacher

    return [LiteLLMTeacher]
