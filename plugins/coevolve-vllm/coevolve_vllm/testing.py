"""A small checkpoint built from a config, for tests, the GPU bench and smoke-testing an install.

Both transformers and vLLM open it from disk like any hub checkpoint: a Qwen3 config and
random weights (``model.safetensors``), and coevolve-grpo's offline BPE tokenizer with its
tool-aware chat template. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["build_tiny_checkpoint"]


def build_tiny_checkpoint(
    path: str | Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    vocab_size: int = 1024,
    max_positions: int = 2048,
    texts: list[str] | None = None,
    seed: int = 0,
    dtype: str = "float32",
) -> Path:
    """Write a random Qwen3 and its tokenizer to ``path`` (``save_pretrained`` layout)."""
    import torch
    from coevolve_grpo.tokenizer import train_tokenizer
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if hidden_size % heads or heads % kv_heads:
        raise ValueError("hidden_size must be divisible by heads, and heads by kv_heads")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(texts or [], vocab_size=vocab_size)
    # vLLM pads the vocabulary internally; the HF config only needs to cover the tokenizer.
    cfg = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden_size // heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model: Any = Qwen3ForCausalLM(cfg)
    finally:
        torch.random.set_rng_state(state)
    model = model.to(getattr(torch, dtype))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
