"""Every code block of docs/teacher.md is executed or checked here, or is marked as needing
something the test machine lacks (``<!-- needs: ... -->`` on the line before the fence)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml

from coevolve_sdk.config import ComponentConfig
from coevolve_sdk.components.registry import get_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "teacher.md"
FENCE = re.compile(r"(?:<!-- needs: (?P<needs>[^>]+?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.DOTALL)


def blocks() -> list[tuple[str, str, str | None]]:
    return [(m["lang"], m["body"], m["needs"]) for m in FENCE.finditer(DOC.read_text())]


def test_every_block_is_runnable_or_marked():
    found = blocks()
    assert len(found) >= 10
    for lang, body, needs in found:
        assert lang in {"python", "yaml", "bash"}, f"unexpected block language {lang!r}"
        if lang == "bash":
            assert needs, f"shell block without a needs: marker:\n{body}"


def test_yaml_blocks_are_valid_teacher_configs():
    reg = get_registry()
    checked = 0
    for lang, body, needs in blocks():
        if lang != "yaml":
            continue
        comp = ComponentConfig.model_validate(yaml.safe_load(body)["teacher"])
        cls = reg.get("teacher", comp.name)
        cls.Options.model_validate(comp.options)
        checked += 1
    assert checked >= 5


def test_python_blocks_run_in_order(monkeypatch):
    pytest.importorskip("coevolve_kvstore", reason="the docs use the example key-value plugin")
    import litellm

    monkeypatch.setattr(litellm, "custom_provider_map", list(litellm.custom_provider_map))
    monkeypatch.setattr(litellm, "provider_list", list(litellm.provider_list))
    monkeypatch.setattr(litellm, "_custom_providers", list(litellm._custom_providers))
    namespace: dict = {"__name__": "docs_teacher"}
    out = io.StringIO()
    ran = 0
    for lang, body, needs in blocks():
        if lang != "python":
            continue
        code = compile(body, f"{DOC.name}:python-block", "exec")
        if needs:
            continue  # compiled, so at least it is valid Python
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
        ran += 1
    assert ran >= 4
    printed = out.getvalue()
    # the outputs the page promises in its comments
    assert "['reflect: reply holds no JSON object']" in printed
    assert "calls 1 1" in printed
    assert "It never called set.\n1 True True" in printed
    assert "6 True replay graded successful" in printed
    assert "Set apples to 3, add 2 to it, and store 1 under pears. 5" in printed
