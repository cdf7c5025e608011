"""Shared set-up for the BFCL plugin tests.

bfcl-eval must be installed (``pip install --no-deps bfcl-eval==2026.3.23``); without it every
test here is skipped with that instruction. BFCL's project root is pointed at a temporary
folder before anything imports ``bfcl_eval``.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile

import pytest

if not os.environ.get("BFCL_PROJECT_ROOT"):
    os.environ["BFCL_PROJECT_ROOT"] = tempfile.mkdtemp(prefix="coevolve-bfcl-tests-")

if importlib.util.find_spec("bfcl_eval") is None:  # pragma: no cover - depends on the install
    pytest.skip("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23", allow_module_level=True)

from .helpers import CATEGORIES


@pytest.fixture(scope="session")
def entries_by_category():
    from coevolve_bfcl import _bfcl

    return {c: _bfcl.load_entries(c) for c in CATEGORIES}
