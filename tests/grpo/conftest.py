"""Shared fixtures of the GRPO plugin tests: offline settings, the pick-tool env, a tiny policy."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from coevolve_sdk.components.context import RunContext  # noqa: E402
from coevolve_grpo.testing import PickToolEnv  # noqa: E402

torch.set_num_threads(1)


def make_context(tmp_path: Path, max_steps: int = 1, seed: int = 0) -> RunContext:
    return RunContext(run_dir=tmp_path, seed=seed, make_env=lambda: PickToolEnv(max_steps=max_steps), log=lambda m: None)


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    return make_context(tmp_path)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny policy (tokenizer trained on the pick-tool env); reloading it is faster
    than training the tokenizer again in every test."""
    from coevolve_grpo.policies import TinyPolicy

    d = tmp_path_factory.mktemp("tiny")
    ctx = make_context(d, max_steps=3)
    pol = TinyPolicy(TinyPolicy.Options(), ctx)
    pol.save(d / "policy")
    return d / "policy"


def tiny_policy(ctx: RunContext, tiny_dir: Path, **opts):
    from coevolve_grpo.policies import TinyPolicy

    pol = TinyPolicy(TinyPolicy.Options(init_from=str(tiny_dir), **opts), ctx)
    ctx.policy = pol
    return pol
