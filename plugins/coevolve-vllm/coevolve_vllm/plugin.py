"""Entry point ``vllm`` of the ``coevolve`` group: the ``vllm`` policy.

The module imports nothing heavy; the policy class (and through it torch, transformers and
vLLM) is imported when the registry asks for it.
"""

from __future__ import annotations

from coevolve_sdk import hookimpl


@hookimpl
def register_policies() -> list[type]:
    from .policy import VLLMPolicy

    return [VLLMPolicy]
