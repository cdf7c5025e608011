"""GRPO checkpoints hold only data, and loading one never runs code from the run folder.

A checkpoint is tensors (safetensors) and JSON. A run folder copied from someone else may hold
a crafted pickle under any file name a checkpoint uses now or used before (Accelerate's
``optimizer.bin``, ``random_states_0.pkl``, ``custom_checkpoint_0.pkl``, ``reference.pt``,
transformers' ``pytorch_model.bin``): loading must either ignore it or refuse it with an error
that names the file, and never execute it. Checkpoints written by the earlier, Accelerate-based
layout still resume.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from coevolve_sdk.training.algorithm import CheckpointError
from coevolve_grpo.algorithm import GRPO, GRPOOptions

from .conftest import make_context, tiny_policy
from .test_grpo_step import _random_groups

OPTIONS = dict(lr=1e-2, beta=0.01, epochs=2, mini_batches=2, micro_batch_size=3, lr_schedule="cosine", warmup_steps=1, total_steps=6, cpu=True)


class Planted:
    """Unpickling this creates the file ``marker``: proof that the loader ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plant(file: Path, marker: Path) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    if file.exists():
        file.unlink()
    torch.save({"state": Planted(marker)}, file)


def _alg(tmp_path: Path, tiny_dir: Path) -> GRPO:
    ctx = make_context(tmp_path)
    tiny_policy(ctx, tiny_dir)
    return GRPO(GRPOOptions(**OPTIONS), ctx)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> tuple[Path, Path]:
    """A checkpoint after 2 steps (``step/algorithm`` + ``step/policy``), and the same state in
    the layout the earlier, Accelerate-based GRPO wrote (``accelerate/``, ``policy/`` and
    ``reference/`` inside ``algorithm/``)."""
    root = tmp_path_factory.mktemp("ckpt")
    alg = _alg(root / "run", tiny_dir)
    groups = _random_groups(300, seed=9)
    for _ in range(2):
        alg.step(groups)
    alg.save(root / "step" / "algorithm")
    write_legacy_checkpoint(alg, root / "legacy" / "algorithm")
    return root / "step", root / "legacy"


def write_legacy_checkpoint(alg: GRPO, path: Path) -> None:
    """What ``GRPO.save`` wrote before checkpoints became data-only, with the same calls."""
    acc = alg.accelerator
    acc.register_for_checkpointing(alg.scheduler, alg.counters)
    acc.save_state(str(path / "accelerate"))
    alg.policy.save(path / "policy", state_dict=acc.get_state_dict(alg.model))
    (path / "reference").mkdir(parents=True)
    torch.save(alg.ref_model.state_dict(), path / "reference" / "reference.pt")


def _same_state(a: GRPO, b: GRPO) -> None:
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)
    for p, q in zip(a.ref_model.parameters(), b.ref_model.parameters()):
        assert torch.equal(p, q)
    sa, sb = a.optimizer.state_dict(), b.optimizer.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for k, st in sa["state"].items():
        for name, v in st.items():
            assert torch.equal(torch.as_tensor(v), torch.as_tensor(sb["state"][k][name])), (k, name)
    assert a.scheduler.state_dict() == b.scheduler.state_dict()
    assert a.counters.state_dict() == b.counters.state_dict()


def test_a_checkpoint_holds_only_safetensors_and_json(trained: tuple[Path, Path]) -> None:
    step, _ = trained
    files = [f for f in step.rglob("*") if f.is_file()]
    assert {f.parent.name for f in files} == {"algorithm", "policy"}
    assert {f.suffix for f in files} <= {".json", ".safetensors", ".jinja"}, sorted(f.name for f in files)
    from safetensors import safe_open

    for f in files:  # each parses as what its name says
        if f.suffix == ".json":
            json.loads(f.read_text(encoding="utf-8"))
        elif f.suffix == ".safetensors":
            with safe_open(str(f), framework="pt") as st:
                assert list(st.keys()), f
    assert (step / "algorithm" / "rng-rank0.safetensors").exists() and (step / "algorithm" / "reference.safetensors").exists()


def test_loading_restores_rng_and_continues_like_the_saved_run(trained: tuple[Path, Path], tmp_path: Path, tiny_dir: Path) -> None:
    step, _ = trained
    torch.manual_seed(1234)
    alg = _alg(tmp_path / "a", tiny_dir)
    alg.load(step / "algorithm")
    random_after_load = torch.rand(4)
    # the saved generator state is the one the saving process had at save time
    from coevolve_grpo.state_files import load_tree

    saved = load_tree(step / "algorithm", "rng-rank0")["torch"]
    torch.set_rng_state(saved)
    random_after_save = torch.rand(4)
    assert torch.equal(random_after_load, random_after_save)
    assert alg.counters.step == 2 and alg.scheduler.last_epoch == 2


def test_an_older_accelerate_checkpoint_still_resumes(trained: tuple[Path, Path], tmp_path: Path, tiny_dir: Path) -> None:
    step, legacy = trained
    new = _alg(tmp_path / "new", tiny_dir)
    new.load(step / "algorithm")
    old = _alg(tmp_path / "old", tiny_dir)
    logs: list[str] = []
    old.context.log = logs.append
    old.load(legacy / "algorithm")
    _same_state(new, old)
    assert any("earlier version" in m and "random states" in m for m in logs)
    groups = _random_groups(300, seed=9)
    new.step(groups)
    old.step(groups)
    for p, q in zip(new.model.parameters(), old.model.parameters()):
        assert torch.equal(p, q)


# Every file name a checkpoint holds now, one that older versions wrote, or one that
# transformers or Accelerate would read if present; relative to the checkpoint's step folder.
CURRENT = [
    "policy/model.safetensors", "policy/config.json", "policy/tokenizer.json", "policy/tokenizer_config.json",
    "algorithm/trainer.json", "algorithm/optimizer.json", "algorithm/optimizer.safetensors",
    "algorithm/rng-rank0.json", "algorithm/rng-rank0.safetensors", "algorithm/reference.safetensors",
]
STRAY = [
    "policy/pytorch_model.bin", "policy/training_args.bin", "algorithm/optimizer.bin", "algorithm/scheduler.bin",
    "algorithm/random_states_0.pkl", "algorithm/custom_checkpoint_0.pkl", "algorithm/reference.pt",
    "algorithm/reference/reference.pt", "algorithm/accelerate/optimizer.bin", "algorithm/rng-rank1.json",
]
LEGACY = [
    "algorithm/accelerate/optimizer.bin", "algorithm/accelerate/custom_checkpoint_0.pkl",
    "algorithm/accelerate/custom_checkpoint_1.pkl", "algorithm/accelerate/random_states_0.pkl",
    "algorithm/accelerate/model.safetensors", "algorithm/accelerate/scheduler.bin",
    "algorithm/reference/reference.pt", "algorithm/policy/model.safetensors", "algorithm/policy/pytorch_model.bin",
]


def test_the_planted_file_would_run_code_if_unpickled(tmp_path: Path) -> None:
    """The test's crafted file is real: an unrestricted torch.load executes it."""
    marker = tmp_path / "ran"
    plant(tmp_path / "x.bin", marker)
    torch.load(tmp_path / "x.bin", weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("layout,names", [("current", CURRENT + STRAY), ("legacy", LEGACY)])
def test_a_planted_pickle_is_never_executed(trained: tuple[Path, Path], tmp_path: Path, tiny_dir: Path, layout: str, names: list[str]) -> None:
    source = trained[0] if layout == "current" else trained[1]
    alg = _alg(tmp_path / "run", tiny_dir)
    outcomes: dict[str, str] = {}
    for name in names:
        ck = tmp_path / "copies" / name.replace("/", "_")
        shutil.copytree(source, ck)
        marker = tmp_path / f"ran-{name.replace('/', '_')}"
        plant(ck / name, marker)
        try:
            if name.startswith("policy/") and layout == "current":
                alg.policy.load(ck / "policy")  # what evaluation loads
            alg.load(ck / "algorithm")
            outcomes[name] = "ignored"
        except CheckpointError as e:
            assert str(ck) in str(e) or name.split("/")[-1] in str(e), f"{name}: the error does not name the file: {e}"
            outcomes[name] = "refused"
        assert not marker.exists(), f"loading a checkpoint with a crafted {name} ran its code"
        assert not list(tmp_path.glob("ran-*"))
    refused = {n for n, o in outcomes.items() if o == "refused"}
    # a file the checkpoint needs is refused; one it does not use is ignored
    if layout == "current":
        assert refused == set(CURRENT), outcomes
    else:
        needed = {"algorithm/accelerate/optimizer.bin", "algorithm/accelerate/custom_checkpoint_0.pkl",
                  "algorithm/accelerate/custom_checkpoint_1.pkl", "algorithm/reference/reference.pt",
                  "algorithm/policy/model.safetensors"}
        assert refused == needed, outcomes


def test_damaged_files_raise_an_error_naming_them(trained: tuple[Path, Path], tmp_path: Path, tiny_dir: Path) -> None:
    alg = _alg(tmp_path / "run", tiny_dir)
    cases = {
        "algorithm/optimizer.safetensors": lambda f: f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2]),
        "algorithm/trainer.json": lambda f: f.write_text("{\"format\": "),
        "algorithm/rng-rank0.json": lambda f: f.unlink(),
        "policy/model.safetensors": lambda f: f.unlink(),
    }
    for name, damage in cases.items():
        ck = tmp_path / name.replace("/", "_")
        shutil.copytree(trained[0], ck)
        damage(ck / name)
        if name == "algorithm/rng-rank0.json":
            logs: list[str] = []
            alg.context.log = logs.append
            alg.load(ck / "algorithm")  # a missing RNG file (fewer processes wrote it) is said, not fatal
            assert any("no random state for process 0" in m for m in logs)
            continue
        with pytest.raises(CheckpointError) as e:
            alg.load(ck / "algorithm")
        assert name.split("/")[-1] in str(e.value), str(e.value)


def test_weights_of_another_model_size_are_refused_with_the_fix(trained: tuple[Path, Path], tmp_path: Path) -> None:
    from coevolve_grpo.policies import TinyPolicy

    ctx = make_context(tmp_path)
    other = TinyPolicy(TinyPolicy.Options(hidden_size=32, heads=2, kv_heads=1), ctx)
    with pytest.raises(CheckpointError, match="model's size changed"):
        other.load(trained[0] / "policy")


def test_no_unrestricted_unpickling_in_the_grpo_plugin() -> None:
    """The plugin's source never asks torch for an unrestricted load, nor uses pickle to load."""
    import coevolve_grpo

    root = Path(coevolve_grpo.__file__).parent
    for f in root.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        assert "weights_only=False" not in text, f
        assert "pickle.load" not in text and "load_state(" not in text, f


def test_state_trees_with_shared_views_and_odd_tensors_round_trip(tmp_path: Path) -> None:
    """Tensors already alone on their CPU storage are written without a copy; every other kind
    (views, two tensors on one storage, the same tensor twice, non-contiguous, empty, a scalar,
    bfloat16) is still written whole and read back equal, and the saved tree does not alias the
    caller's tensors afterwards."""
    from coevolve_grpo.state_files import load_tree, save_tree

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    own = torch.randn(5, 3)
    tree = {
        "own": own, "again": own,                        # one tensor stored twice
        "row": base[1], "rows": base[2:],                # two views of one storage, offset != 0
        "base": base, "t": base.t(),                     # the storage itself and a non-contiguous view
        "empty": torch.empty(0), "scalar": torch.tensor(3.5), "bf16": torch.ones(3, dtype=torch.bfloat16),
        "steps": [torch.tensor(7), {"lr": 0.1}],
    }
    save_tree(tree, tmp_path, "state")
    base.add_(100.0)  # the file holds what the tree was when it was saved
    own.zero_()
    back = load_tree(tmp_path, "state")
    want = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert torch.equal(back["base"], want) and torch.equal(back["row"], want[1]) and torch.equal(back["rows"], want[2:])
    assert torch.equal(back["t"], want.t())
    assert torch.equal(back["again"], back["own"]) and not torch.equal(back["own"], own)
    assert back["empty"].shape == (0,) and back["scalar"].item() == 3.5 and back["bf16"].dtype == torch.bfloat16
    assert back["steps"][0].item() == 7 and back["steps"][1] == {"lr": 0.1}
