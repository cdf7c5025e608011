"""CoEvolve plugin: BFCL multi-turn function calling, graded by BFCL's official checker.

Importing this package is cheap: ``bfcl_eval`` is loaded only when an environment starts an
episode or lists its tasks. See ``docs/bfcl.md`` for installation, options and splits.
"""

from __future__ import annotations

from coevolve_sdk import lazy_exports

__version__ = "0.1.0"

__all__ = ["BFCLMultiTurnEnv", "BFCLOptions", "__version__"]


__getattr__, __dir__ = lazy_exports(__name__, {"BFCLMultiTurnEnv": ".env", "BFCLOptions": ".env"})  # `import coevolve_bfcl` stays light
