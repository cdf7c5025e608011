"""Small helpers shared by the BFCL tests."""

from __future__ import annotations

from typing import Any

CATEGORIES = ["base", "miss_func", "miss_param", "long_context"]


def make_env(**kw: Any):
    from coevolve_bfcl.env import BFCLMultiTurnEnv

    return BFCLMultiTurnEnv(**kw)
