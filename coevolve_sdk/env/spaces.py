"""A gymnasium space for arbitrary unicode text.

``gymnasium.spaces.Text`` only admits a fixed charset (alphanumeric by default), which rejects
JSON, spaces and any non-ASCII character; tool-use observations contain all three.
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces


class AnyText(spaces.Space[str]):
    """Any Python string up to ``max_length`` characters."""

    def __init__(self, max_length: int = 1_000_000, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(0, 48))
        # Mostly printable ASCII with some wider characters, so env.step is fuzzed with both.
        codes = self.np_random.integers(32, 0x2FFF, size=n)
        return "".join(chr(int(c)) for c in codes)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length
