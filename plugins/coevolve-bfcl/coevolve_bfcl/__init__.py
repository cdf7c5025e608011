"""CoEvolve plugin: BFCL multi-turn function calling, graded by BFCL's official checker.

Importing this package is cheap: ``bfcl_eval`` is loaded only when an environment starts an
episode or lists its tasks. See ``docs/bfcl.md`` for installation, options and splits.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["BFCLMultiTurnEnv", "BFCLOptions", "__version__"]


def __getattr__(name: str):  # lazy, so `import coevolve_bfcl` stays light
    if name in ("BFCLMultiTurnEnv", "BFCLOptions"):
        from . import env

        return getattr(env, name)
    raise AttributeError(name)
