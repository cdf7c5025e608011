"""CoEvolve vLLM plugin: fast rollouts with vLLM on GPU machines (policy ``vllm``).

Importing this package is cheap: vLLM, torch and transformers are imported when the policy
is built. The plugin needs a CUDA machine with ``vllm`` installed in its own environment
(vLLM pins its own torch and transformers); see ``docs/vllm.md``.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
