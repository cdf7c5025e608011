"""CoEvolve GRPO plugin: the paper's RL algorithm on Accelerate, and the policies it trains.

Importing this package is cheap: torch, transformers and accelerate are imported only when a
policy or the algorithm is built.

* ``hf``   -- :class:`coevolve_grpo.policies.HFPolicy`, any causal LM by hub id or local path;
* ``tiny`` -- :class:`coevolve_grpo.policies.TinyPolicy`, a small Qwen3 built from a config with
  a byte-level BPE tokenizer trained offline on the environment's own texts;
* ``grpo`` -- :class:`coevolve_grpo.algorithm.GRPO`, paper Eq. 1 with the common variants.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
