"""The deterministic train/test split of BFCL's multi-turn scenarios.

Its own module because both the environment (which tasks a split holds) and the sampler (whose
vocabulary may only come from train entries) need it, and neither should import the other.
"""

from __future__ import annotations

import hashlib

__all__ = ["SPLIT_SALT", "split_of"]

SPLIT_SALT = "coevolve-bfcl-split-v1"


def split_of(entry_id: str, test_fraction: float = 0.5) -> str:
    """``"train"`` or ``"test"`` for a BFCL entry id, decided by a salted hash of its number.

    The four multi-turn categories are variants of the same 200 scenarios (``multi_turn_base_7``
    and ``multi_turn_miss_func_7`` share their state and requests), so the split hashes the
    number only: a scenario is on the same side in every category.
    """
    number = entry_id.rsplit("_", 1)[-1]
    h = int(hashlib.sha256(f"{SPLIT_SALT}:{number}".encode()).hexdigest()[:8], 16)
    return "test" if h / 2**32 < test_fraction else "train"
