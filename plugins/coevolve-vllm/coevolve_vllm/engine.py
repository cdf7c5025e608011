"""The two engines behind the ``vllm`` policy: in the trainer's process, or a remote server.

Both expose the same small surface to the policy: ``generate(groups, kwargs)`` returning
:class:`~coevolve_vllm.shaping.Sample` lists, ``prompt_logprobs(ids)`` for the probe,
``sync_via(path, weights)`` and ``reset_prefix_cache()`` for :class:`~coevolve_vllm.sync.WeightSync`,
and ``sleep()`` / ``wake()`` (no-ops for the server).

vLLM is imported only inside methods, when an engine is built or used; the unit tests hand a
stand-in for ``vllm.LLM`` (the CUDA engine) to :class:`ColocatedEngine` and a small HTTP server
standing in for ``vllm serve`` to :class:`ServerEngine`.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from .shaping import (
    PromptGroup,
    Sample,
    completions_payload,
    prompt_logprobs_from_completion_json,
    prompt_logprobs_from_request_output,
    samples_from_completion_choices,
    samples_from_request_output,
)
from .sync import Unavailable, Weights, find_model, load_weights_on_worker

__all__ = ["ColocatedEngine", "ServerEngine", "LLMWeightSyncClient", "vllm_types"]


def vllm_types() -> tuple[Any, Any]:
    """``(SamplingParams, TokensPrompt)`` from the installed vLLM (pure-Python modules)."""
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import SamplingParams

    return SamplingParams, TokensPrompt


class LLMWeightSyncClient:
    """vLLM's trainer-side transfer engines talk to the inference side through a four-method
    client (``VLLMWeightSyncClient``); this one forwards to an in-process ``vllm.LLM``'s
    ``RLOfflineMixin`` methods, whose request shapes differ slightly (they wrap the payload)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.llm.init_weight_transfer_engine({"init_info": init_info})

    def start_weight_update(self) -> None:
        self.llm.start_weight_update()

    def update_weights(self, update_info: Any) -> None:
        self.llm.update_weights({"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.llm.finish_weight_update(weight_version=weight_version)


class ColocatedEngine:
    """A ``vllm.LLM`` on the trainer's GPU.

    ``in_process`` says whether the engine core and its worker run in this process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` or the external launcher): then the worker's model
    is the very module ``apply_model`` and ``collective_rpc`` reach, and weights are handed over
    by reference. ``sleep_level`` 1 moves weights to CPU and drops the KV cache while the
    trainer runs; 2 drops the weights too (they are re-synced on wake); 0 never sleeps.
    """

    def __init__(
        self,
        llm: Any,
        *,
        in_process: bool = True,
        sleep_level: int = 1,
        weight_transfer_backend: str | None = None,
        trainer_model: Any = None,
        trainer_world_size: int = 1,
        types: tuple[Any, Any] | None = None,
    ) -> None:
        if sleep_level not in (0, 1, 2):
            raise ValueError(f"sleep_level must be 0, 1 or 2, got {sleep_level}")
        self.llm = llm
        self.in_process = in_process
        self.sleep_level = sleep_level
        self.weight_transfer_backend = weight_transfer_backend
        self.trainer_model = trainer_model
        self.trainer_world_size = trainer_world_size
        self._types = types
        self.awake = True
        #: True after a level-2 sleep: the engine's weights are garbage until the next sync.
        self.weights_lost = False
        self._rl_engine: Any = None
        self._version = 0

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        *,
        model: str,
        tokenizer: str | None,
        dtype: str,
        max_model_len: int,
        gpu_memory_utilization: float,
        sleep_level: int,
        enable_prefix_caching: bool,
        enforce_eager: bool,
        seed: int,
        in_process: bool,
        weight_transfer_backend: str | None,
        tensor_parallel_size: int,
        max_num_seqs: int | None,
        extra: dict[str, Any],
        trainer_model: Any,
        log: Callable[[str], None] = print,
    ) -> "ColocatedEngine":
        """Build ``vllm.LLM`` next to the trainer.

        Under a multi-process launch (``torch.distributed`` initialised with several ranks),
        the engine joins the launcher's process group as TRL's colocate mode does
        (``distributed_executor_backend="external_launcher"``): each group of
        ``tensor_parallel_size`` ranks holds one engine, and the groups are data-parallel.
        """
        world, rank = 1, 0
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                world, rank = dist.get_world_size(), dist.get_rank()
        except ImportError:  # pragma: no cover - torch is always there with vLLM
            pass
        kwargs: dict[str, Any] = {
            "model": model,
            "tokenizer": tokenizer or model,
            "dtype": dtype,
            "max_model_len": max_model_len,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enable_sleep_mode": sleep_level > 0,
            "enable_prefix_caching": enable_prefix_caching,
            "enforce_eager": enforce_eager,
            "logprobs_mode": "raw_logprobs",
            "tensor_parallel_size": tensor_parallel_size,
        }
        if max_num_seqs is not None:
            kwargs["max_num_seqs"] = max_num_seqs
        if world > 1:
            if world % tensor_parallel_size:
                raise ValueError(f"world size {world} is not a multiple of tensor_parallel_size {tensor_parallel_size}")
            kwargs["distributed_executor_backend"] = "external_launcher"
            kwargs["data_parallel_size"] = world // tensor_parallel_size
            kwargs["seed"] = seed + rank // tensor_parallel_size
            in_process = True  # the external launcher always runs the engine in-process
        else:
            kwargs["seed"] = seed
            if in_process:
                kwargs["distributed_executor_backend"] = "uni"
        if weight_transfer_backend is not None:
            if in_process:
                raise ValueError(
                    f"weight_transfer_backend '{weight_transfer_backend}' moves tensors between processes; "
                    "set in_process: false (the engine then runs in a child process) or leave it unset"
                )
            kwargs["weight_transfer_config"] = {"backend": weight_transfer_backend}
        kwargs.update(extra)
        # Must be set before vllm reads its environment (at engine construction).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if in_process else "1"
        from vllm import LLM

        log(
            f"vllm: building the colocated engine ({'in-process' if in_process else 'child process'}, "
            f"gpu_memory_utilization={gpu_memory_utilization}, sleep_level={sleep_level})"
        )
        llm = LLM(**kwargs)
        return cls(
            llm,
            in_process=in_process,
            sleep_level=sleep_level,
            weight_transfer_backend=weight_transfer_backend,
            trainer_model=trainer_model,
            trainer_world_size=world,
        )

    def types(self) -> tuple[Any, Any]:
        if self._types is None:
            self._types = vllm_types()
        return self._types

    # ------------------------------------------------------------------ generation
    def generate(self, groups: list[PromptGroup], kwargs: list[dict[str, Any]]) -> list[list[Sample]]:
        SamplingParams, TokensPrompt = self.types()
        if len(groups) != len(kwargs):
            raise ValueError("one set of sampling kwargs per request is needed")
        if not groups:
            return []
        prompts = [TokensPrompt(prompt_token_ids=list(g.token_ids)) for g in groups]
        params = [SamplingParams(**kw) for kw in kwargs]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        if len(outputs) != len(groups):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(groups)} prompts")
        return [samples_from_request_output(o) for o in outputs]

    def prompt_logprobs(self, token_ids: Sequence[int]) -> list[float]:
        SamplingParams, TokensPrompt = self.types()
        sp = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        (out,) = self.llm.generate([TokensPrompt(prompt_token_ids=list(token_ids))], sp, use_tqdm=False)
        return prompt_logprobs_from_request_output(out)

    # ------------------------------------------------------------------ memory
    def sleep(self) -> None:
        if self.sleep_level == 0 or not self.awake:
            return
        self.llm.sleep(level=self.sleep_level)
        self.awake = False
        if self.sleep_level == 2:
            self.weights_lost = True

    def wake(self) -> None:
        if self.awake:
            return
        # Weights first, then the KV cache: the new weights can be loaded before the cache
        # takes its share of memory back.
        self.llm.wake_up(tags=["weights"])
        self.llm.wake_up(tags=["kv_cache"])
        self.awake = True

    # ------------------------------------------------------------------ weight sync
    def reset_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()

    def sync_via(self, path: str, weights: Weights) -> int:
        if path == "rl_ipc":
            return self._sync_rl_ipc()
        if path in ("apply_model", "collective_rpc", "direct") and not self.in_process:
            raise Unavailable("the engine runs in a child process; tensors would be pickled across it")
        if path == "apply_model":
            if not callable(getattr(self.llm, "apply_model", None)):
                raise Unavailable("this vLLM has no LLM.apply_model")
            batch = list(weights())
            self.llm.apply_model(lambda model: model.load_weights(weights=batch))
            return len(batch)
        if path == "collective_rpc":
            if not callable(getattr(self.llm, "collective_rpc", None)):
                raise Unavailable("this vLLM has no LLM.collective_rpc")
            batch = list(weights())
            self.llm.collective_rpc(load_weights_on_worker, args=(batch,))
            return len(batch)
        if path == "direct":
            model, _chain = find_model(self.llm)
            batch = list(weights())
            model.load_weights(weights=batch)
            return len(batch)
        raise Unavailable(f"path '{path}' does not apply to a colocated engine")

    def _sync_rl_ipc(self) -> int:
        if self.weight_transfer_backend != "ipc":
            raise Unavailable("the engine was not built with weight_transfer_backend: ipc")
        if self.in_process:
            raise Unavailable("CUDA IPC needs the engine in a child process")
        if self.trainer_world_size > 1:
            raise Unavailable("vLLM's IPC trainer engine all-gathers across trainer ranks; one engine per rank here")
        if self.trainer_model is None:
            raise Unavailable("no trainer model to read the weights from")
        from vllm.distributed.weight_transfer.base import ModuleSource
        from vllm.distributed.weight_transfer.ipc_engine import (
            IPCTrainerInitInfo,
            IPCTrainerWeightTransferEngine,
        )

        if self._rl_engine is None:
            self._rl_engine = IPCTrainerWeightTransferEngine.trainer_init(
                IPCTrainerInitInfo(rank=0, packed=True),
                client=LLMWeightSyncClient(self.llm),
                source=ModuleSource(self.trainer_model),
            )
        self._version += 1
        self._rl_engine.send_weights()
        self.llm.update_weight_version(f"coevolve-{self._version}")
        return sum(1 for _ in self.trainer_model.parameters())


class ServerEngine:
    """A ``vllm serve`` process on other GPUs (or another node), reached over HTTP.

    Generation goes through the OpenAI-compatible ``/v1/completions`` with token-id prompts
    (``return_token_ids``, ``logprobs: 0``); weights go through vLLM's RL routes
    (``/init_weight_transfer_engine``, ``/start_weight_update``, ``/update_weights``,
    ``/finish_weight_update``) plus an NCCL broadcast from this process, driven by vLLM's
    ``NCCLTrainerWeightTransferEngine``. The server must run with ``VLLM_SERVER_DEV_MODE=1``
    (which mounts the RL and cache routes) and ``--weight-transfer-config '{"backend": "nccl"}'``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        timeout: float = 600.0,
        nccl_host: str | None = None,
        nccl_port: int = 51216,
        inference_world_size: int = 1,
        trainer_model: Any = None,
        max_parallel_requests: int = 8,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.nccl_host = nccl_host
        self.nccl_port = nccl_port
        self.inference_world_size = inference_world_size
        self.trainer_model = trainer_model
        self.max_parallel_requests = max_parallel_requests
        self.awake = True
        self.weights_lost = False
        self._nccl_engine: Any = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ HTTP
    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.base_url}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            raise RuntimeError(f"vLLM server {method} {path} -> HTTP {e.code}: {detail}") from None
        except urllib.error.URLError as e:
            raise ConnectionError(f"cannot reach the vLLM server at {self.base_url}: {e.reason}") from None
        return json.loads(raw) if raw.strip() else None

    def wait_ready(self, timeout: float = 300.0, interval: float = 2.0) -> None:
        """Poll ``/health`` until the server answers (model loading takes minutes)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                self._request("GET", "/health")
                return
            except (ConnectionError, RuntimeError) as e:
                last = e
                time.sleep(interval)
        raise ConnectionError(f"the vLLM server at {self.base_url} did not become healthy in {timeout:.0f}s: {last}")

    # ------------------------------------------------------------------ generation
    def generate(self, groups: list[PromptGroup], kwargs: list[dict[str, Any]]) -> list[list[Sample]]:
        if len(groups) != len(kwargs):
            raise ValueError("one set of sampling kwargs per request is needed")
        # One HTTP request carries one `n`: batch the groups that share their sampling kwargs.
        batches: dict[str, list[int]] = {}
        for i, kw in enumerate(kwargs):
            batches.setdefault(json.dumps(kw, sort_keys=True), []).append(i)
        results: list[list[Sample] | None] = [None] * len(groups)

        def run(idx: list[int]) -> None:
            kw = kwargs[idx[0]]
            body = completions_payload(self.model, [groups[i].token_ids for i in idx], kw)
            resp = self._request("POST", "/v1/completions", body)
            per_prompt = samples_from_completion_choices(resp.get("choices", []), kw["n"], len(idx))
            for i, samples in zip(idx, per_prompt):
                results[i] = samples

        if len(batches) == 1:
            run(next(iter(batches.values())))
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_parallel_requests, len(batches))) as ex:
                for f in [ex.submit(run, idx) for idx in batches.values()]:
                    f.result()
        return [r for r in results if r is not None]

    def prompt_logprobs(self, token_ids: Sequence[int]) -> list[float]:
        body = {
            "model": self.model,
            "prompt": list(token_ids),
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
            "return_token_ids": True,
        }
        resp = self._request("POST", "/v1/completions", body)
        return prompt_logprobs_from_completion_json(resp["choices"][0], token_ids)

    # ------------------------------------------------------------------ memory (the server's own)
    def sleep(self) -> None:
        return None

    def wake(self) -> None:
        return None

    # ------------------------------------------------------------------ weight sync
    def reset_prefix_cache(self) -> None:
        self._request("POST", "/reset_prefix_cache")

    def sync_via(self, path: str, weights: Weights) -> int:
        if path != "nccl":
            raise Unavailable(f"path '{path}' does not apply to a server engine")
        if self.trainer_model is None:
            raise Unavailable("no trainer model to read the weights from")
        from vllm.distributed.weight_transfer import (
            HTTPVLLMWeightSyncClient,
            ModuleSource,
        )
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        with self._lock:
            if self._nccl_engine is None:
                host = self.nccl_host or _own_address(self.base_url)
                self._nccl_engine = NCCLTrainerWeightTransferEngine.trainer_init(
                    NCCLTrainerInitInfo(
                        master_address=host,
                        master_port=self.nccl_port,
                        world_size=1 + self.inference_world_size,
                        rank=0,
                    ),
                    client=HTTPVLLMWeightSyncClient(self.base_url, timeout=self.timeout),
                    source=ModuleSource(self.trainer_model),
                )
            self._nccl_engine.send_weights()
        return sum(1 for _ in self.trainer_model.parameters())


def _own_address(base_url: str) -> str:
    """The address of this host as the server sees it: the local end of a socket to it."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(base_url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    if host in ("localhost", "127.0.0.1", "::1"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, port))
        return s.getsockname()[0]
