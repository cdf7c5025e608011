"""The tiny policy's tokenizer: a byte-level BPE trained offline on the environment's texts.

Why train one: no tokenizer can be downloaded in CI, and a vocabulary fitted to the
environment's own queries, tool schemas and actions makes the sequences short (a tool call is a
handful of tokens), which is what lets a model of a few hundred thousand parameters learn on a
CPU. Training is deterministic: the same texts, in the same order, give the same vocabulary.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Iterable

__all__ = ["SPECIAL_TOKENS", "EOS", "PAD", "chat_template", "shipped_corpus", "template_texts", "train_tokenizer", "env_texts"]

EOS = "<|im_end|>"
PAD = "<|endoftext|>"
#: Special tokens are never split and never merged with neighbours; the pad comes first (id 0).
SPECIAL_TOKENS = [PAD, "<|im_start|>", EOS, "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def chat_template() -> str:
    return resources.files("coevolve_grpo").joinpath("data/tiny_chat_template.jinja").read_text(encoding="utf-8")


def shipped_corpus() -> list[str]:
    text = resources.files("coevolve_grpo").joinpath("data/corpus.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def template_texts() -> list[str]:
    """The fixed strings of the chat template, so they compress into a few tokens each."""
    return [
        "system\n# Tools\nCall a function by writing a <tool_call> block holding one JSON object with "
        '"name" and "arguments". Available functions:\n<tools>\n',
        "</tools>\n",
        "user\n",
        "assistant\n",
        '<tool_call>\n{"name": "', '", "arguments": ', "}\n</tool_call>",
        "<tool_response>\n", "\n</tool_response>",
    ]


def env_texts(env: Any, sample_actions: int = 32, seed: int = 0) -> list[str]:
    """Texts an environment shows the agent: task queries, reference actions, tool schemas,
    opening messages and a few random valid actions (``sample_action`` after a reset).

    Only the train split is read: held-out tasks must not shape anything a run learns, the
    vocabulary included. (A resumed run keeps the tokenizer saved in its checkpoint.)"""
    texts: list[str] = []
    tasks: list[Any] = []
    for split in ("train",):
        try:
            tasks.extend(env.tasks(split))
        except Exception:  # an environment may not have every split
            continue
    for task in tasks:
        texts.append(task.query)
        texts.extend(task.reference_actions)
    try:
        for tool in env.tools():
            texts.append(json.dumps(tool.as_openai(), ensure_ascii=False))
    except Exception:
        pass
    for i, task in enumerate(tasks[: max(1, sample_actions)]):
        try:
            _, info = env.reset(seed=seed + i, options={"task": task})
        except Exception:
            continue
        for m in info.get("messages", []):
            texts.append(str(m.get("content", "")))
        for tool in info.get("tools", []):
            texts.append(json.dumps(tool, ensure_ascii=False))
        if i < sample_actions:
            try:
                texts.append(env.sample_action())
            except Exception:
                pass
    # Deterministic and without duplicates, in first-seen order.
    return list(dict.fromkeys(t for t in texts if t))


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> Any:
    """Train the BPE and wrap it as a ``PreTrainedTokenizerFast`` with the tiny chat template."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    corpus = list(texts) + shipped_corpus() + template_texts()
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        bos_token=None,
        unk_token=None,
        extra_special_tokens=SPECIAL_TOKENS[3:],
    )
    hf.chat_template = chat_template()
    hf.padding_side = "left"
    return hf
