"""The one door to ``bfcl_eval``: pinned version, project root, data loading, the checker.

``bfcl_eval`` creates ``result/``, ``score/`` and ``.file_locks/`` under ``BFCL_PROJECT_ROOT``
when it is first imported, and that root defaults to its own site-packages folder. Every
import of ``bfcl_eval`` in this plugin therefore goes through :func:`bfcl`, which points the
root at a run or temporary folder first. Nothing here runs when the plugin is imported.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

#: The bfcl-eval release this plugin was written and tested against.
BFCL_EVAL_VERSION = "2026.3.23"
#: Its small runtime needs for the multi-turn suite (the rest of its dependency list is
#: provider SDKs, torch and friends, which the multi-turn backends and checker never import).
BFCL_RUNTIME_NEEDS = ["filelock>=3.12", "mpmath>=1.3,<1.4"]
INSTALL_HINT = (
    f"bfcl-eval is not installed. Install it without its multi-GB optional stack:\n"
    f"    pip install --no-deps bfcl-eval=={BFCL_EVAL_VERSION}\n"
    f"or run `python -m coevolve_bfcl.install`."
)

CATEGORIES = {
    "base": "multi_turn_base",
    "miss_func": "multi_turn_miss_func",
    "miss_param": "multi_turn_miss_param",
    "long_context": "multi_turn_long_context",
}
#: The backend classes of the multi-turn suite (all offline, stdlib or mpmath only).
CLASSES = [
    "GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI",
    "TicketAPI", "TradingBot", "TravelAPI", "VehicleControlAPI",
]

_LOCK = threading.RLock()


class BFCLNotInstalled(ImportError):
    pass


def ensure_project_root(run_dir: str | os.PathLike[str] | None = None) -> Path:
    """Point ``BFCL_PROJECT_ROOT`` somewhere harmless before ``bfcl_eval`` is imported.

    An explicit environment variable wins; otherwise ``<run_dir>/bfcl`` or a fresh temporary
    folder. Once ``bfcl_eval`` is imported its root is fixed for the process.
    """
    root = os.environ.get("BFCL_PROJECT_ROOT")
    if not root:
        if run_dir is not None:
            p = Path(run_dir) / "bfcl"
            p.mkdir(parents=True, exist_ok=True)
            root = str(p)
        else:
            root = tempfile.mkdtemp(prefix="coevolve-bfcl-")
        os.environ["BFCL_PROJECT_ROOT"] = root
    return Path(root)


def module(name: str, run_dir: str | os.PathLike[str] | None = None) -> ModuleType:
    """Import ``bfcl_eval.<name>`` after making sure the project root is safe."""
    with _LOCK:
        if "bfcl_eval" not in sys.modules:
            ensure_project_root(run_dir)
        try:
            return importlib.import_module(f"bfcl_eval.{name}")
        except ModuleNotFoundError as e:
            if e.name and e.name.split(".")[0] == "bfcl_eval":
                raise BFCLNotInstalled(INSTALL_HINT) from None
            raise


def category_name(category: str) -> str:
    """``base`` -> ``multi_turn_base`` (the long form is accepted too)."""
    if category in CATEGORIES:
        return CATEGORIES[category]
    if category in CATEGORIES.values():
        return category
    raise ValueError(f"unknown BFCL multi-turn category '{category}'; use one of {sorted(CATEGORIES)}")


@functools.lru_cache(maxsize=None)
def _entries(cat: str) -> tuple[str, ...]:
    utils = module("utils")
    entries = utils.load_dataset_entry(cat, include_language_specific_hint=False)
    answers = {a["id"]: a["ground_truth"] for a in utils.load_ground_truth_entry(cat)}
    out = []
    for e in entries:
        missed = {t: [f["name"] for f in docs] for t, docs in (e.get("missed_function") or {}).items()}
        out.append(json.dumps({
            "id": e["id"],
            "question": e["question"],
            "initial_config": e["initial_config"],
            "involved_classes": e["involved_classes"],
            "missed_function": missed,
            "ground_truth": answers[e["id"]],
        }))
    # Stored as JSON text so every caller gets its own mutable copy.
    return tuple(out)


def load_entries(category: str) -> list[dict[str, Any]]:
    """The official entries of a multi-turn category, each with its ground truth.

    Each entry is ``{"id", "question", "initial_config", "involved_classes",
    "missed_function" ({turn: [names]}), "ground_truth" ([turn][call string])}``. Function
    docs are not copied into every entry; :func:`func_docs` serves them per class.
    """
    return [json.loads(s) for s in _entries(category_name(category))]


@functools.lru_cache(maxsize=None)
def _class_docs(cls_name: str) -> str:
    cfg = module("constants.executable_backend_config")
    paths = module("constants.eval_config")
    path = Path(paths.MULTI_TURN_FUNC_DOC_PATH) / cfg.MULTI_TURN_FUNC_DOC_FILE_MAPPING[cls_name]
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.dumps(docs)


def func_docs(cls_name: str) -> list[dict[str, Any]]:
    """BFCL's own function docs of one backend class (a fresh copy)."""
    if cls_name not in CLASSES:
        raise ValueError(f"unsupported BFCL backend class '{cls_name}'; supported: {CLASSES}")
    return json.loads(_class_docs(cls_name))


def backend_class(cls_name: str) -> type:
    cfg = module("constants.executable_backend_config")
    mod = importlib.import_module(cfg.CLASS_FILE_PATH_MAPPING[cls_name])
    return getattr(mod, cls_name)


def is_stateless(cls_name: str) -> bool:
    return cls_name in module("constants.executable_backend_config").STATELESS_CLASSES


def checker() -> Any:
    return module("eval_checker.multi_turn_eval.multi_turn_checker").multi_turn_checker


def purge_instances(model_name: str) -> None:
    """Forget the backend instances BFCL's executor cached under ``model_name``.

    The executor keeps instances in its module globals keyed by model name and entry id; left
    there they leak state into the next grading under the same name and grow without bound.
    """
    utils = module("eval_checker.multi_turn_eval.multi_turn_utils")
    prefix = re.sub(r"[-./:]", "_", model_name) + "_"
    g = vars(utils)
    for k in [k for k in list(g) if k.startswith(prefix) and k.endswith("_instance")]:
        g.pop(k, None)


def official_check(model_calls: list[list[list[str]]], entry: dict[str, Any]) -> dict[str, Any]:
    """Grade with BFCL's ``multi_turn_checker`` under a fresh model name, then clean up.

    ``model_calls`` is ``[turn][step][call string]`` and must have one list per ground-truth
    turn (the official runner fails an entry whose turn count differs: force-terminated).
    """
    gt = entry["ground_truth"]
    if len(model_calls) != len(gt):
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error_message": f"{len(model_calls)} model turns for {len(gt)} ground-truth turns"}
    name = "coevolve_" + uuid.uuid4().hex[:16]
    test_entry = {"id": entry["id"], "initial_config": entry["initial_config"],
                  "involved_classes": entry["involved_classes"]}
    category = entry["id"].rsplit("_", 1)[0]
    try:
        return checker()(model_calls, gt, test_entry, category, name)
    finally:
        purge_instances(name)
