"""The ``vllm`` policy: the trainer's Hugging Face model, with rollouts sampled by vLLM.

It is the ``hf`` policy of coevolve-grpo (same options, tokenizer, chat-template rendering,
``module`` for the algorithm to train, ``save``/``load``) with ``generate`` replaced by vLLM.
The trainer's weights stay the source of truth; vLLM holds a copy that is brought up to date
after every optimisation step. The policy learns when the weights change only through the
core's declared phases (:class:`~coevolve_sdk.training.policy.TrainablePolicy`), never by watching torch:

* ``before_update()`` (the loop calls it on every process before each optimisation step; an
  algorithm calls it before a warm start or before adopting other weights), ``load`` and
  ``set_decoding_module`` mark the copy stale; ``before_update`` also puts a colocated engine
  to sleep, so the training phase gets the GPU memory back;
* ``after_update()`` (which the loop calls on every process right after each optimisation
  step) or else the next ``generate`` wakes the engine, syncs through
  :class:`~coevolve_vllm.sync.WeightSync`, resets the prefix cache and checks a fixed probe
  sequence's logprobs against the trainer's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from coevolve_grpo.policies import HFPolicy, HFPolicyOptions, cut_at_stop_texts
from pydantic import BaseModel, Field, model_validator

from coevolve_sdk import Generation, RunContext

from .shaping import plan_requests, sampling_kwargs, to_generations
from .sync import (
    COLOCATED_PATHS,
    SERVER_PATHS,
    ProbeResult,
    SyncReport,
    WeightSync,
    compare_logprobs,
)

__all__ = ["VLLMPolicy", "VLLMPolicyOptions", "ProbeMismatch", "PROBE_MESSAGES"]

#: A fixed conversation rendered with the policy's chat template: the probe sequence.
PROBE_MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You are a careful assistant that calls tools when needed."},
    {"role": "user", "content": "List the files in /tmp, then count the lines of notes.txt."},
    {"role": "assistant", "content": 'I will call ls first: {"name": "ls", "arguments": {"path": "/tmp"}}'},
]


class ProbeMismatch(RuntimeError):
    """vLLM's logprobs of the probe sequence disagree with the trainer's after a sync."""


class VLLMPolicyOptions(HFPolicyOptions):
    """Options of the ``hf`` policy plus the engine's. ``model`` must be a local directory or
    hub id that both transformers and vLLM can open."""

    mode: Literal["colocated", "server"] = Field(
        "colocated", description="colocated: engine in the trainer's process and GPU; server: a separate `vllm serve`."
    )
    # ---- colocated
    gpu_memory_utilization: float = Field(
        0.3, gt=0.0, lt=1.0, description="Fraction of the GPU's memory vLLM may take (weights + KV cache)."
    )
    sleep_level: Literal[0, 1, 2] = Field(
        1, description="While the trainer runs: 1 offloads vLLM's weights to CPU and frees the KV cache, "
        "2 frees both (re-synced on wake), 0 keeps everything resident."
    )
    in_process: bool = Field(
        True, description="Run the engine core in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0): weights are "
        "handed over by reference. False: a child process (needed for weight_transfer_backend: ipc)."
    )
    weight_transfer_backend: Literal["ipc"] | None = Field(
        None, description="Build the engine with vLLM's RL weight-transfer API (CUDA IPC) enabled."
    )
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per engine (multi-GPU colocate: ranks per engine).")
    max_num_seqs: int | None = Field(None, ge=1, description="vLLM's max concurrent sequences; None = vLLM's default.")
    enforce_eager: bool = Field(False, description="Disable CUDA graphs (faster start, slower decoding).")
    enable_prefix_caching: bool = True
    vllm_kwargs: dict[str, Any] = Field(default_factory=dict, description="More keyword arguments for vllm.LLM.")
    sync_paths: list[str] | None = Field(
        None, description=f"Weight update paths to try, in order. Default colocated: {list(COLOCATED_PATHS)}; "
        f"server: {list(SERVER_PATHS)}."
    )
    # ---- server
    server_url: str | None = Field(None, description="Base URL of `vllm serve`, e.g. http://gpu-node:8000.")
    server_model: str | None = Field(None, description="Model name the server serves; defaults to `model`.")
    server_timeout: float = Field(600.0, gt=0)
    server_world_size: int = Field(1, ge=1, description="GPUs of the server (tensor x data parallel): NCCL peers.")
    nccl_host: str | None = Field(None, description="Address of this trainer as the server reaches it; default auto.")
    nccl_port: int = Field(51216, ge=1, le=65535)
    # ---- sampling and checks
    merge_duplicate_prompts: bool = Field(
        True, description="Send identical prompts once with n samples (the core passes a group's K prompts)."
    )
    probe: bool = Field(True, description="After each sync, compare vLLM's logprobs of a fixed sequence with the trainer's.")
    probe_tokens: int = Field(64, ge=2, le=4096)
    probe_max_abs_diff: float = Field(1.0, gt=0, description="Largest per-token |logp_trainer - logp_vllm| accepted.")
    probe_mean_abs_diff: float = Field(0.1, gt=0, description="Largest mean |logp_trainer - logp_vllm| accepted (bf16).")
    probe_on_fail: Literal["warn", "raise"] = "warn"
    engine_seed: int | None = Field(None, description="vLLM's sampling seed (offset by the data-parallel rank); default: the run seed.")

    @model_validator(mode="after")
    def _check(self) -> "VLLMPolicyOptions":
        if self.mode == "server" and not self.server_url:
            raise ValueError("mode 'server' needs server_url (the `vllm serve` address)")
        allowed = COLOCATED_PATHS if self.mode == "colocated" else SERVER_PATHS
        if self.sync_paths is not None:
            bad = [p for p in self.sync_paths if p not in allowed]
            if bad or not self.sync_paths:
                raise ValueError(f"sync_paths {self.sync_paths} for mode '{self.mode}': choose from {list(allowed)}")
        return self


class VLLMPolicy(HFPolicy):
    """Rollouts with vLLM; training on the ``hf`` policy's model. See the module docstring."""

    name: ClassVar[str] = "vllm"
    Options: ClassVar[type[BaseModel]] = VLLMPolicyOptions

    def __init__(self, options: BaseModel | None = None, context: RunContext | None = None, *, engine: Any = None) -> None:
        """``engine`` replaces the vLLM engine (tests pass a stand-in for the CUDA engine);
        by default it is built on first use, once the launcher's process group exists."""
        super().__init__(options, context)
        o = self.options
        self.engine: Any = engine
        self.weight_sync = WeightSync(
            o.sync_paths or (COLOCATED_PATHS if o.mode == "colocated" else SERVER_PATHS), log=self._log
        )
        self.last_sync: SyncReport | None = None
        self._stale = True  # the engine loaded the checkpoint from disk; treat it as unsynced once
        self._gen_tokens = 0
        self._gen_seconds = 0.0
        self._probe_ids: list[int] | None = None

    # ------------------------------------------------------------------ trainer side
    def _log(self, msg: str) -> None:
        (self.context.log if self.context is not None else print)(msg)

    # ---- the phases of the trainer <-> rollout seam (coevolve_sdk.training.policy.TrainablePolicy)
    def before_update(self) -> None:
        """The weights are about to change: the engine's copy is stale from now on, and a
        colocated engine goes to sleep so that training gets the GPU memory back. Local to this
        process (no communication), as the seam requires."""
        self._stale = True
        if self.engine is not None:
            self.engine.sleep()

    def load(self, path: Path) -> None:
        super().load(path)
        self._stale = True

    def set_decoding_module(self, module: Any) -> None:
        super().set_decoding_module(module)
        self._stale = True
        if self.engine is not None:
            self.engine.trainer_model = module

    def _trainer_weights(self) -> Any:
        model = self.model

        def it() -> Any:
            for name, p in model.named_parameters():
                yield name, p.detach()

        return it

    def trainer_logprobs(self, token_ids: list[int]) -> list[float]:
        """Teacher-forced log-probabilities of tokens 1..L-1 under the trainer's model."""
        import torch

        model = self.model
        was_training = model.training
        try:
            model.eval()
            with torch.no_grad():
                ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)
                logits = model(input_ids=ids).logits[0, :-1].float()
                lp = torch.log_softmax(logits, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
        finally:
            if was_training:
                model.train()
        return [float(v) for v in lp.cpu().tolist()]

    def probe_ids(self) -> list[int]:
        """The fixed probe sequence: a short tool-use exchange in this policy's chat template."""
        if self._probe_ids is None:
            ids = self.encode_text(self.render(PROBE_MESSAGES, add_generation_prompt=False))
            if len(ids) < 2:
                raise ValueError("the probe conversation renders to fewer than two tokens")
            self._probe_ids = ids[: self.options.probe_tokens]
        return self._probe_ids

    # ------------------------------------------------------------------ engine
    def _ensure_engine(self) -> Any:
        if self.engine is not None:
            return self.engine
        o = self.options
        if o.mode == "server":
            from .engine import ServerEngine

            assert o.server_url is not None
            eng = ServerEngine(
                o.server_url,
                model=o.server_model or o.model,
                timeout=o.server_timeout,
                nccl_host=o.nccl_host,
                nccl_port=o.nccl_port,
                inference_world_size=o.server_world_size,
                trainer_model=self.model,
            )
            eng.wait_ready()
        else:
            from .engine import ColocatedEngine

            dtype = str(next(self.model.parameters()).dtype).replace("torch.", "")
            eng = ColocatedEngine.build(
                model=o.model,
                tokenizer=o.tokenizer,
                dtype=dtype,
                max_model_len=o.max_context,
                gpu_memory_utilization=o.gpu_memory_utilization,
                sleep_level=o.sleep_level,
                enable_prefix_caching=o.enable_prefix_caching,
                enforce_eager=o.enforce_eager,
                seed=o.engine_seed if o.engine_seed is not None else (self.context.seed if self.context is not None else 0),
                in_process=o.in_process,
                weight_transfer_backend=o.weight_transfer_backend,
                tensor_parallel_size=o.tensor_parallel_size,
                max_num_seqs=o.max_num_seqs,
                extra=dict(o.vllm_kwargs),
                trainer_model=self.model,
                log=self._log,
            )
        self.engine = eng
        return eng

    def _needs_sync(self) -> bool:
        eng = self.engine
        return self._stale or (eng is not None and eng.weights_lost)

    def _ready(self) -> None:
        """Wake the engine and bring its weights up to date before sampling."""
        eng = self._ensure_engine()
        eng.wake()
        if self._needs_sync():
            self._sync()

    def _verify(self) -> ProbeResult:
        ids = self.probe_ids()
        o = self.options
        return compare_logprobs(
            self.trainer_logprobs(ids),
            self.engine.prompt_logprobs(ids),
            max_tol=o.probe_max_abs_diff,
            mean_tol=o.probe_mean_abs_diff,
        )

    def _sync(self) -> SyncReport:
        eng = self._ensure_engine()
        eng.wake()
        world, rank = _world()
        if self.options.mode == "server" and world > 1:
            # One server, several trainer ranks: rank 0 pushes the weights, the others wait
            # for it so that nobody samples from the old weights. Every rank reaches this
            # point together (the first generate of a step), so the barrier lines up.
            import torch.distributed as dist

            if rank == 0:
                report = self.weight_sync.sync(eng, self._trainer_weights(), self._verify if self.options.probe else None)
            else:
                report = SyncReport(self.weight_sync.chosen or "nccl", 0.0, 0)
            dist.barrier()
        else:
            report = self.weight_sync.sync(eng, self._trainer_weights(), self._verify if self.options.probe else None)
        eng.weights_lost = False
        self._stale = False
        self.last_sync = report
        if report.probe is not None and not report.probe.ok:
            msg = (
                f"vllm: after syncing through '{report.path}', vLLM's logprobs of the probe sequence differ from "
                f"the trainer's (max {report.probe.max_abs_diff:.3g}, mean {report.probe.mean_abs_diff:.3g}; "
                f"tolerance {self.options.probe_max_abs_diff}/{self.options.probe_mean_abs_diff})"
            )
            if self.options.probe_on_fail == "raise":
                raise ProbeMismatch(msg)
            self._log(msg)
        return report

    def sync_weights(self) -> dict[str, float]:
        """Sync now, whether or not the weights look changed; return the sync's metrics."""
        self._stale = True
        self._ensure_engine().wake()
        return self._sync().metrics()

    def after_update(self) -> dict[str, float]:
        """Call after an optimisation step, on every process: sync the engine, check the probe,
        and return metrics (sync path and time, probe agreement, rollout tokens/s since the
        last call)."""
        metrics = self.sync_weights()
        return {**metrics, **self._throughput()}

    def _throughput(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if self._gen_seconds > 0:
            metrics["vllm/rollout_tokens_per_s"] = self._gen_tokens / self._gen_seconds
        metrics["vllm/rollout_tokens"] = float(self._gen_tokens)
        self._gen_tokens, self._gen_seconds = 0, 0.0
        return metrics

    def sleep(self) -> None:
        """Free the engine's GPU memory now (colocated mode; a no-op for a server)."""
        if self.engine is not None:
            self.engine.sleep()

    # ------------------------------------------------------------------ sampling
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
    ) -> list[Generation]:
        if not prompts:
            return []
        self._ready()
        greedy = greedy or temperature <= 0.0
        groups = plan_requests(prompts, merge_duplicates=self.options.merge_duplicate_prompts or greedy)
        stops = self.stop_token_ids
        kws = [
            sampling_kwargs(
                n=1 if greedy else g.n,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                greedy=greedy,
                stop_token_ids=stops,
            )
            for g in groups
        ]
        t0 = time.perf_counter()
        samples = self.engine.generate(groups, kws)
        self._gen_seconds += time.perf_counter() - t0
        gens = to_generations(groups, samples, stop_token_ids=stops, decode=self.decode, replicate=greedy)
        if self.options.stop_texts:  # vLLM does not detokenise here, so stop texts are applied afterwards
            gens = [cut_at_stop_texts(g, list(self.options.stop_texts), self.decode) for g in gens]
        self._gen_tokens += sum(len(g.token_ids) for g in gens)
        return gens



def _world() -> tuple[int, int]:
    """(world size, rank) of torch.distributed, or (1, 0) when it is not initialised."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return 1, 0
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0
