"""Checkpoint files that hold only data: tensors in safetensors, everything else in JSON.

A run folder may come from someone else (a shared experiment, a downloaded checkpoint), and
Python's pickle, which ``torch.save`` and Accelerate's ``save_state`` use, runs whatever code
the file names while loading it. So the GRPO plugin writes its optimiser, scheduler, counters
and RNG states through :func:`save_tree` instead: a nested structure of dicts, lists, tuples,
numbers, strings and tensors becomes ``NAME.json`` (the structure, with each tensor replaced by
a reference) and ``NAME.safetensors`` (the tensors). :func:`load_tree` reverses it with a JSON
parser and safetensors' reader; neither can run code. Anything else in the structure (an
arbitrary object) is refused when saving, with its path in the structure.

Run folders written before (Accelerate's ``optimizer.bin``, ``custom_checkpoint_N.pkl``,
``reference.pt``) are read with :func:`load_legacy`, which uses ``torch.load(weights_only=True)``:
torch's restricted unpickler, which rebuilds tensors and plain containers only and refuses any
other global, so a crafted file fails instead of running. Their RNG files
(``random_states_N.pkl``) hold numpy objects that the restricted unpickler refuses; they are
not read at all.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from coevolve_sdk import CheckpointError

__all__ = ["save_tree", "load_tree", "tree_exists", "load_legacy", "rng_state", "set_rng_state", "FORMAT"]

#: Written into every JSON file, checked when reading.
FORMAT = "coevolve-tree/1"


def tree_exists(folder: Path, name: str) -> bool:
    return (Path(folder) / f"{name}.json").is_file()


def save_tree(tree: Any, folder: Path, name: str) -> None:
    """Write ``tree`` as ``folder/name.json`` plus ``folder/name.safetensors`` (when it holds tensors)."""
    import torch
    from safetensors.torch import save_file

    tensors: dict[str, Any] = {}
    storages: set[int] = set()

    def own_cpu_tensor(x: Any) -> Any:
        """``x`` itself when it already is a CPU tensor alone on its whole storage, else a copy.

        safetensors refuses tensors that share memory, so a view, a tensor on another device
        or a second tensor on a storage already taken is copied; an optimizer's moments (each
        on its own storage) are written as they are. Copying them all doubled the checkpoint's
        memory (a 135M-parameter model's AdamW state is 1 GB) and was a fifth of its time.
        The save is synchronous, so nothing changes a tensor while it is written."""
        t = x.detach()
        if t.device.type == "cpu" and t.is_contiguous() and t.storage_offset() == 0:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if storage.nbytes() == t.numel() * t.element_size() and ptr not in storages:
                if ptr:  # empty tensors have no storage to share
                    storages.add(ptr)
                return t
        return t.to("cpu", copy=True).contiguous()

    def enc(x: Any, where: str) -> Any:
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, torch.Tensor):
            key = f"t{len(tensors)}"
            tensors[key] = own_cpu_tensor(x)
            return {"tensor": key}
        if _is_ndarray(x):
            key = f"t{len(tensors)}"
            tensors[key] = torch.from_numpy(x.copy())
            return {"ndarray": key}
        if isinstance(x, list):
            return {"list": [enc(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, tuple):
            return {"tuple": [enc(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, dict):
            items = []
            for k, v in x.items():
                if not isinstance(k, (str, int, bool, float)) and k is not None:
                    raise TypeError(f"checkpoint state {where}: key {k!r} of type {type(k).__name__} cannot be stored as JSON")
                items.append([k, enc(v, f"{where}[{k!r}]")])
            return {"dict": items}
        if hasattr(x, "item") and callable(x.item) and type(x).__module__ == "numpy":  # numpy scalar
            return x.item()
        raise TypeError(
            f"checkpoint state {where} is a {type(x).__module__}.{type(x).__name__}; only numbers, strings, lists, "
            "dicts and tensors are stored (no pickles)"
        )

    skeleton = enc(tree, name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if tensors:
        save_file(tensors, str(folder / f"{name}.safetensors"))
    with open(folder / f"{name}.json", "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, "tensors": bool(tensors), "tree": skeleton}, f)


def load_tree(folder: Path, name: str, device: Any = "cpu") -> Any:
    """Read what :func:`save_tree` wrote; CheckpointError naming the file when it is missing or damaged."""
    from safetensors.torch import load_file

    folder = Path(folder)
    meta_file = folder / f"{name}.json"
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise CheckpointError(f"{meta_file} is missing: the checkpoint is incomplete") from e
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{meta_file} is not readable JSON ({type(e).__name__}: {e}); the checkpoint is damaged") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or "tree" not in meta:
        raise CheckpointError(f"{meta_file} is not a {FORMAT} state file; the checkpoint is damaged or from another program")
    tensors: dict[str, Any] = {}
    if meta.get("tensors"):
        tfile = folder / f"{name}.safetensors"
        if not tfile.is_file():
            raise CheckpointError(f"{tfile} is missing: the checkpoint is incomplete")
        try:
            tensors = load_file(str(tfile), device=str(device))
        except Exception as e:  # safetensors raises its own types for a bad header or a short file
            raise CheckpointError(f"{tfile} is not a readable safetensors file ({type(e).__name__}: {e}); the checkpoint is damaged") from e

    def dec(x: Any) -> Any:
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, dict) and len(x) == 1:
            (tag, v), = x.items()
            if tag in ("tensor", "ndarray"):
                if v not in tensors:
                    raise CheckpointError(f"{meta_file} refers to tensor {v!r}, which its .safetensors file lacks; the checkpoint is damaged")
                return tensors[v].cpu().numpy() if tag == "ndarray" else tensors[v]
            if tag == "list" and isinstance(v, list):
                return [dec(i) for i in v]
            if tag == "tuple" and isinstance(v, list):
                return tuple(dec(i) for i in v)
            if tag == "dict" and isinstance(v, list):
                return {k: dec(val) for k, val in v}
        raise CheckpointError(f"{meta_file} holds an entry this reader does not know ({str(x)[:80]}); the checkpoint is damaged")

    try:
        return dec(meta["tree"])
    except (TypeError, ValueError) as e:  # e.g. a dict entry that is not a [key, value] pair
        raise CheckpointError(f"{meta_file} is malformed ({type(e).__name__}: {e}); the checkpoint is damaged") from e


def load_legacy(file: Path) -> Any:
    """A file of an older checkpoint written with ``torch.save``, read with torch's restricted
    unpickler (``weights_only=True``). CheckpointError when the file asks for anything but
    tensors and plain containers: it may be crafted to run code, and is not loaded."""
    import pickle

    import torch

    file = Path(file)
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except FileNotFoundError as e:
        raise CheckpointError(f"{file} is missing: the checkpoint is incomplete") from e
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"{file} holds more than tensors and plain data, so loading it could run code; it was not loaded "
            f"(torch: {str(e).splitlines()[0]}). Delete it, or resume from a checkpoint written by this version"
        ) from e
    except Exception as e:
        raise CheckpointError(f"{file} cannot be read ({type(e).__name__}: {e}); the checkpoint is damaged") from e


def _is_ndarray(x: Any) -> bool:
    return type(x).__name__ == "ndarray" and type(x).__module__ == "numpy"


# ---------------------------------------------------------------------- RNG states
def rng_state() -> dict[str, Any]:
    """This process's generators: Python's, numpy's global one, torch's CPU one and every CUDA
    device's (what Accelerate's ``save_state`` captured)."""
    import numpy as np
    import torch

    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys, int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = list(torch.cuda.get_rng_state_all())
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(v) for v in internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((str(kind), np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"].to(torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.to(torch.uint8) for t in state["cuda"]])
