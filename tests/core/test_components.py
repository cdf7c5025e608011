"""Every component kind is built the same way: ``Cls(options, context)``."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import pytest
from pydantic import ValidationError

import coevolve_sdk  # noqa: F401  (registers the installed environments with gymnasium)
from coevolve_sdk.training.algorithm import Algorithm
from coevolve_sdk.components.base import KINDS, Component
from coevolve_sdk.components.context import RunContext
from coevolve_sdk.env.base import AgentEnv
from coevolve_sdk.training.policy import Policy
from coevolve_sdk.evolution.pool import SyntheticShareSampler, TaskSampler
from coevolve_sdk.components.registry import get_registry
from coevolve_sdk.evolution.signals import SignalDetector
from coevolve_sdk.evolution.teacher import RandomExplorer, Teacher


def test_every_kind_base_is_a_component() -> None:
    for base in (AgentEnv, Policy, Algorithm, SignalDetector, Teacher, TaskSampler):
        assert issubclass(base, Component), base
    reg = get_registry()
    for k in KINDS:
        for name in reg.names(k.name):
            assert issubclass(reg.get(k.name, name), Component), (k.name, name)


def test_options_from_a_mapping_the_model_or_none(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path)
    s = SyntheticShareSampler({"share": 0.25}, ctx)
    assert s.options.share == 0.25 and s.context is ctx
    assert SyntheticShareSampler(SyntheticShareSampler.Options(share=0.75)).options.share == 0.75
    assert SyntheticShareSampler().options.share == 0.5 and SyntheticShareSampler().context is None
    with pytest.raises(ValidationError, match="shar"):
        SyntheticShareSampler({"shar": 0.3})
    # another component's options are a bug to surface here, not a missing attribute later
    with pytest.raises(TypeError, match="SyntheticShareSampler takes options as Options"):
        SyntheticShareSampler(RandomExplorer.Options())


def test_environment_takes_options_and_context_and_still_works_with_gymnasium(tmp_path: Path) -> None:
    pytest.importorskip("coevolve_kvstore", reason="uses the example key-value plugin")
    from coevolve_kvstore.env import KVStoreEnv

    ctx = RunContext(run_dir=tmp_path)
    env = KVStoreEnv({"max_steps": 4}, ctx)
    assert env.options.max_steps == 4 and env.context is ctx
    assert KVStoreEnv(KVStoreEnv.Options(max_steps=6)).options.max_steps == 6
    made = gymnasium.make(KVStoreEnv.gym_id(), max_steps=3).unwrapped
    assert made.options.max_steps == 3 and made.context is None
    obs, _ = made.reset(seed=0)
    assert isinstance(obs, str)
