"""CoEvolve plugin for AppWorld (Trivedi et al., 2024).

AppWorld pins pydantic<2 and httpx<0.28 and freezes the clock of the process that opens a
world, so it never runs in the SDK's process: ``coevolve appworld setup`` gives it a
virtualenv of its own, and the environment talks over loopback HTTP to worker processes that
each hold one world. This package imports no AppWorld code and stays light to import.
"""

APPWORLD_VERSION = "0.1.3.post1"
"""The pinned AppWorld release: the synthetic-task builder relies on its on-disk layout."""

__all__ = ["APPWORLD_VERSION"]
