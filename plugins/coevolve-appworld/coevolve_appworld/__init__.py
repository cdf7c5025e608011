"""CoEvolve plugin for AppWorld (Trivedi et al., 2024).

AppWorld pins pydantic<2 and httpx<0.28 and freezes the clock of the process that opens a
world, so it never runs in the SDK's process: ``coevolve appworld setup`` gives it a
virtualenv of its own, and the environment talks over loopback HTTP to worker processes that
each hold one world. This package imports no AppWorld code and stays light to import.
"""

APPWORLD_VERSION = "0.1.3.post1"
"""The pinned AppWorld release: the synthetic-task builder relies on its on-disk layout."""

__all__ = ["APPWORLD_VERSION"]

# Import the SDK before any submodule of this package: ``import coevolve_sdk`` registers every
# installed environment with gymnasium, which imports ``coevolve_appworld.env``. If a user's
# first import were ``coevolve_appworld.env`` itself, that registration would meet a half-
# imported module and ``gymnasium.make("coevolve/appworld-v0")`` would fail later.
import coevolve_sdk as _coevolve_sdk  # noqa: E402,F401
