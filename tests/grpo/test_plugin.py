"""Registration through the entry point, strict options, and a light import."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError


def test_entry_point_registers_policies_and_algorithm():
    from coevolve_sdk.components.registry import get_registry

    reg = get_registry()
    from coevolve_grpo.algorithm import GRPO
    from coevolve_grpo.policies import HFPolicy, TinyPolicy

    assert reg.get("policy", "hf") is HFPolicy
    assert reg.get("policy", "tiny") is TinyPolicy
    assert reg.get("algorithm", "grpo") is GRPO
    assert reg.info("algorithm", "grpo").distribution == "coevolve-grpo"


def test_options_are_strict_and_default_to_the_paper():
    from coevolve_grpo.algorithm import GRPOOptions

    o = GRPOOptions()
    assert (o.lr, o.clip_low, o.clip_high, o.beta, o.loss_norm, o.kl_estimator) == (1e-6, 0.2, 0.28, 1e-3, "group_tokens", "k3")
    with pytest.raises(ValidationError):
        GRPOOptions(learning_rate=1e-3)
    with pytest.raises(ValidationError):
        GRPOOptions(loss_norm="mean")


def test_cosine_schedule_needs_total_steps(ctx, tiny_dir):
    from coevolve_grpo.algorithm import GRPO, GRPOOptions

    from .conftest import tiny_policy

    tiny_policy(ctx, tiny_dir)
    with pytest.raises(ValueError, match="total_steps"):
        GRPO(GRPOOptions(lr_schedule="cosine", cpu=True), ctx)


def test_plugin_import_and_registration_do_not_import_torch():
    code = (
        "import sys, coevolve_grpo.plugin as p; p.register_policies(); p.register_algorithms(); "
        "heavy = [m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
