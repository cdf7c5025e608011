"""Fixtures of the vLLM plugin tests.

vLLM cannot run here (no CUDA). Two things stand in for it, and only for what needs CUDA:

* vLLM's own pure-Python types (``SamplingParams``, ``RequestOutput``, ``CompletionOutput``,
  ``Logprob``, ``FlatLogprobs``, ``TokensPrompt``) come from the real vLLM source: an
  installed ``vllm`` if importable, else the unpacked 0.33.0 wheel named by
  ``COEVOLVE_VLLM_SRC`` (default ``/tmp/vllm-src``) plus the few small packages those modules
  import, installed with ``pip install --target`` into ``COEVOLVE_VLLM_EXTRA`` (default
  ``/tmp/vllm-extra``). ``tests/vllm/README.md`` has the commands. Tests that need them skip
  with that reason when they are absent.
* ``fake_engine.FakeLLM`` replaces ``vllm.LLM`` (the CUDA engine) and nothing else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = os.environ.get("COEVOLVE_VLLM_SRC", "/tmp/vllm-src")
EXTRA = os.environ.get("COEVOLVE_VLLM_EXTRA", "/tmp/vllm-extra")
_TYPES: tuple[Any, ...] | None = None
_REASON = ""


def load_vllm_types() -> tuple[Any, ...] | None:
    """Import vLLM's pure-Python modules once; None (and a reason) when they are not there."""
    global _TYPES, _REASON
    if _TYPES is not None or _REASON:
        return _TYPES
    try:
        import vllm  # noqa: F401  # a real install (a GPU machine)
    except ImportError:
        if not Path(SRC, "vllm", "sampling_params.py").exists():
            _REASON = (
                f"needs vLLM's pure-Python types: no vllm installed and no unpacked vLLM wheel at {SRC} "
                "(see tests/vllm/README.md; set COEVOLVE_VLLM_SRC / COEVOLVE_VLLM_EXTRA)"
            )
            return None
        for p in (EXTRA, SRC):
            if Path(p).exists() and p not in sys.path:
                sys.path.insert(0, p)
    try:
        from vllm.inputs import TokensPrompt
        from vllm.logprobs import FlatLogprobs, Logprob
        from vllm.outputs import CompletionOutput, RequestOutput
        from vllm.sampling_params import SamplingParams
    except Exception as e:  # missing small dependency of vLLM's modules, or a CUDA-only import
        _REASON = f"vLLM's pure-Python types do not import here ({type(e).__name__}: {e}); see tests/vllm/README.md"
        return None
    _TYPES = (SamplingParams, TokensPrompt, RequestOutput, CompletionOutput, Logprob, FlatLogprobs)
    return _TYPES


@pytest.fixture(scope="session")
def vllm_types() -> tuple[Any, ...]:
    types = load_vllm_types()
    if types is None:
        pytest.skip(_REASON)
    return types


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen3 (hidden 32, 2 layers) with the offline BPE tokenizer, on disk."""
    from coevolve_vllm.testing import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-vllm"), hidden_size=32, layers=2, vocab_size=512)
