"""Weight sync from the trainer to vLLM: one helper over every update path vLLM supports.

vLLM has several ways to receive new weights, and which ones work depends on the version and
on how the engine was built (in the trainer's process or in a child process, with or without
a ``weight_transfer_config``). Rather than guess, :class:`WeightSync` tries the configured
paths in order, keeps the first one that both runs and passes the logprob probe, and reports
which one it was. A later failure of the remembered path sends it back through the list.

Colocated paths (engine on the trainer's GPU), in the default order:

* ``rl_ipc`` -- vLLM's RL weight-transfer API (``LLM.init_weight_transfer_engine``,
  ``start_weight_update`` / ``update_weights`` / ``finish_weight_update``) with the CUDA-IPC
  backend and vLLM's trainer-side ``IPCTrainerWeightTransferEngine``. Needs the engine built
  with ``weight_transfer_config={"backend": "ipc"}`` and in a child process (CUDA IPC cannot
  open a handle in the process that made it), and a single trainer process.
* ``apply_model`` -- ``LLM.apply_model(lambda model: model.load_weights(weights))``: runs
  directly on the model when the engine lives in this process (no copy of the tensors).
* ``collective_rpc`` -- ``LLM.collective_rpc(fn, args=(weights,))`` with ``fn(worker, ...)``
  calling ``worker.model_runner.model.load_weights``. Same condition.
* ``direct`` -- the internal attribute chain to the model (what TRL's colocate mode does);
  several spellings are tried because it moves between versions.

Server path: ``nccl`` -- vLLM's RL HTTP routes plus an NCCL broadcast, driven by vLLM's
``NCCLTrainerWeightTransferEngine`` (see :mod:`coevolve_vllm.engine`).

After every successful sync the engine's prefix cache is reset: cached KV blocks were computed
with the old weights.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence

__all__ = [
    "COLOCATED_PATHS",
    "SERVER_PATHS",
    "SyncError",
    "SyncReport",
    "ProbeResult",
    "WeightSync",
    "compare_logprobs",
    "load_weights_on_worker",
    "find_model",
]

COLOCATED_PATHS: tuple[str, ...] = ("rl_ipc", "apply_model", "collective_rpc", "direct")
SERVER_PATHS: tuple[str, ...] = ("nccl",)
#: Stable numbers for the ``vllm/sync_path`` metric (metrics are floats).
PATH_IDS: dict[str, int] = {name: i + 1 for i, name in enumerate(COLOCATED_PATHS + SERVER_PATHS)}

Weights = Callable[[], Iterable[tuple[str, Any]]]


class SyncError(RuntimeError):
    """No update path worked; the message lists why each one failed."""


class Unavailable(Exception):
    """A path that does not apply to this engine (not an error of the path itself)."""


@dataclass
class ProbeResult:
    """How well the engine's logprobs of the probe sequence match the trainer's."""

    max_abs_diff: float
    mean_abs_diff: float
    tokens: int
    ok: bool

    def metrics(self, prefix: str = "vllm/probe_") -> dict[str, float]:
        return {
            f"{prefix}logprob_max_abs_diff": self.max_abs_diff,
            f"{prefix}logprob_mean_abs_diff": self.mean_abs_diff,
            f"{prefix}tokens": float(self.tokens),
            f"{prefix}ok": 1.0 if self.ok else 0.0,
        }


def compare_logprobs(
    trainer: Sequence[float], engine: Sequence[float], *, max_tol: float, mean_tol: float
) -> ProbeResult:
    """Compare two logprob sequences of the same tokens.

    bf16 weights and kernels make the two differ a little on every token; a sync that did not
    happen (or loaded the wrong tensors) makes them differ a lot. The mean catches a broad
    shift, the max catches one broken layer that only shows on some tokens.
    """
    if len(trainer) != len(engine):
        raise ValueError(f"probe logprobs have different lengths: trainer {len(trainer)}, engine {len(engine)}")
    if not trainer:
        raise ValueError("the probe sequence needs at least two tokens")
    diffs = [abs(float(a) - float(b)) for a, b in zip(trainer, engine)]
    mx = max(diffs)
    mean = sum(diffs) / len(diffs)
    ok = mx <= max_tol and mean <= mean_tol and all(d == d for d in diffs)  # d == d rejects NaN
    return ProbeResult(max_abs_diff=mx, mean_abs_diff=mean, tokens=len(diffs), ok=ok)


@dataclass
class SyncReport:
    path: str
    seconds: float
    params: int
    attempts: list[tuple[str, str]] = field(default_factory=list)  # (path, why it was skipped or failed)
    probe: ProbeResult | None = None

    def metrics(self) -> dict[str, float]:
        m = {
            "vllm/sync_seconds": self.seconds,
            "vllm/sync_path": float(PATH_IDS.get(self.path, 0)),
            "vllm/sync_params": float(self.params),
            "vllm/sync_fallbacks": float(len(self.attempts)),
        }
        if self.probe is not None:
            m.update(self.probe.metrics())
        return m


class SyncTarget(Protocol):
    """What a path needs from the engine wrapper (see ``engine.ColocatedEngine``)."""

    def sync_via(self, path: str, weights: Weights) -> int:
        """Load ``weights()`` through ``path``; return how many tensors were sent. Raise
        ``Unavailable`` when the path does not apply to this engine."""

    def reset_prefix_cache(self) -> None: ...


class WeightSync:
    """Try the update paths in order; remember the first that works and say which it was."""

    def __init__(self, paths: Sequence[str], log: Callable[[str], None] = print) -> None:
        unknown = [p for p in paths if p not in PATH_IDS]
        if unknown:
            raise ValueError(f"unknown weight sync path(s) {unknown}; known: {sorted(PATH_IDS)}")
        if not paths:
            raise ValueError("at least one weight sync path is needed")
        self.paths = list(paths)
        self.log = log
        self.chosen: str | None = None
        self.history: list[SyncReport] = []

    def sync(
        self,
        target: SyncTarget,
        weights: Weights,
        verify: Callable[[], ProbeResult] | None = None,
    ) -> SyncReport:
        order = self.paths if self.chosen is None else [self.chosen] + [p for p in self.paths if p != self.chosen]
        attempts: list[tuple[str, str]] = []
        last_probe: ProbeResult | None = None
        last_loaded: tuple[str, int] | None = None
        t0 = time.perf_counter()
        for path in order:
            try:
                n = target.sync_via(path, weights)
            except Unavailable as e:
                attempts.append((path, f"not available: {e}"))
                continue
            except Exception as e:  # a real failure of this path: try the next one
                attempts.append((path, f"failed: {type(e).__name__}: {e}"))
                continue
            target.reset_prefix_cache()
            last_loaded = (path, n)
            if verify is not None:
                probe = verify()
                last_probe = probe
                if not probe.ok:
                    attempts.append(
                        (path, f"loaded but the probe disagrees (max |dlogp| {probe.max_abs_diff:.3g}, mean {probe.mean_abs_diff:.3g})")
                    )
                    continue
            report = SyncReport(path, time.perf_counter() - t0, n, attempts, last_probe)
            if self.chosen != path:
                skipped = "; ".join(f"{p}: {why}" for p, why in attempts)
                self.log(f"vllm: weight sync uses path '{path}'" + (f" (skipped {skipped})" if skipped else ""))
            self.chosen = path
            self.history.append(report)
            return report
        if last_loaded is not None and last_probe is not None:
            # Every path that ran loaded the weights but none passes the probe: keep the last
            # one and report the disagreement (the metric shows it); the caller decides.
            path, n = last_loaded
            report = SyncReport(path, time.perf_counter() - t0, n, attempts, last_probe)
            self.chosen = path
            self.history.append(report)
            return report
        detail = "\n".join(f"  - {p}: {why}" for p, why in attempts)
        raise SyncError(f"no weight sync path worked:\n{detail}")


# ---------------------------------------------------------------------- worker-side helpers
def load_weights_on_worker(worker: Any, weights: list[tuple[str, Any]]) -> int:
    """Run on a vLLM worker by ``collective_rpc``: load ``weights`` into its model.

    Module level so that it pickles by reference when the engine is in another process.
    """
    model = worker.model_runner.model
    model.load_weights(weights=weights)
    return len(weights)


#: Attribute chains from an ``LLM`` to the ``nn.Module`` the worker runs, newest first.
MODEL_PATHS: tuple[tuple[str, ...], ...] = (
    ("llm_engine", "model_executor", "driver_worker", "worker", "model_runner", "model"),
    ("llm_engine", "model_executor", "driver_worker", "model_runner", "model"),
    ("llm_engine", "engine_core", "engine_core", "model_executor", "driver_worker", "worker", "model_runner", "model"),
    ("llm_engine", "engine_core", "engine_core", "model_executor", "driver_worker", "model_runner", "model"),
)


def find_model(llm: Any) -> tuple[Any, str]:
    """The in-process model behind ``llm`` and the attribute chain that reached it."""
    tried = []
    for chain in MODEL_PATHS:
        obj = llm
        for attr in chain:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if obj is not None and callable(getattr(obj, "load_weights", None)):
            return obj, ".".join(chain)
        tried.append(".".join(chain))
    raise Unavailable("no in-process model found at " + ", ".join(tried))
