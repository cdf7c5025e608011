"""The tiny policy's tokenizer is trained on what training may see: no held-out request."""

from coevolve_grpo.tokenizer import env_texts
from coevolve_warehouse.env import WarehouseEnv


def test_the_tokenizer_corpus_holds_no_held_out_task() -> None:
    env = WarehouseEnv()
    corpus = "\n".join(env_texts(env))
    assert env.tasks("train")[0].query in corpus
    for split in ("dev", "test"):
        leaked = [t.query for t in env.tasks(split) if t.query in corpus]
        assert not leaked, leaked[:3]
