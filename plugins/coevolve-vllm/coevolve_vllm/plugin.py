"""Entry point ``vllm`` of the ``coevolve`` group: the ``vllm`` policy and its step-end sync.

The module imports nothing heavy; the policy class (and through it torch, transformers and
vLLM) is imported when the registry asks for it.
"""

from __future__ import annotations

from typing import Any

from coevolve_sdk.hooks import hookimpl


@hookimpl
def register_policies() -> list[type]:
    from .policy import VLLMPolicy

    return [VLLMPolicy]


@hookimpl
def on_step_end(loop: Any, step: int, metrics: dict[str, float]) -> None:
    """Sync vLLM right after the optimisation step and record the sync's metrics.

    Runs on the main process (the loop calls this hook there only). With one process the
    engine syncs here; with several, every rank syncs at its next ``generate`` and this
    records the latest sync (see ``VLLMPolicy.step_metrics``). The loop has already stored ``metrics`` when this hook runs, so
    the sync metrics are written to the store for the same step, and added to ``metrics`` for
    the progress display that follows.
    """
    policy = getattr(loop, "policy", None)
    step_metrics = getattr(policy, "step_metrics", None)
    if policy is None or getattr(policy, "name", "") != "vllm" or not callable(step_metrics):
        return
    extra = step_metrics()
    metrics.update(extra)
    store = getattr(loop, "store", None)
    if store is not None and extra:
        store.add_metrics(step, extra)
