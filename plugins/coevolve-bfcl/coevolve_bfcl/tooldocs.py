"""BFCL function docs as ``ToolSpec`` records, in full or compact form.

BFCL documents each backend method with a JSON-schema-like dict whose types are Python-ish
(``dict``, ``float``, ``tuple``...). Chat templates expect JSON Schema, so types are mapped
(``dict`` -> ``object``, ``float`` -> ``number``, ``tuple`` -> ``array``).

``full`` keeps BFCL's text (class blurb, description, parameter descriptions): what the
official leaderboard shows a model. ``compact`` keeps the first sentence of the method's own
description and the parameter names, types and required list, which is about a fifth of the
size: the form for small models with short contexts.
"""

from __future__ import annotations

import re
from typing import Any

from coevolve_sdk import ToolSpec

_TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_TOOL_DESC = re.compile(r"Tool description:\s*(.*)", re.DOTALL)


def _schema(s: dict[str, Any], keep_descriptions: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t = s.get("type")
    if t is not None:
        mapped = _TYPE_MAP.get(t, t)
        if mapped is not None:
            out["type"] = mapped
    if keep_descriptions:
        for k in ("description", "default", "enum"):
            if k in s:
                out[k] = s[k]
    elif "enum" in s:
        out["enum"] = s["enum"]
    if isinstance(s.get("items"), dict):
        out["items"] = _schema(s["items"], keep_descriptions)
    if isinstance(s.get("properties"), dict):
        out["properties"] = {k: _schema(v, keep_descriptions) for k, v in s["properties"].items() if isinstance(v, dict)}
    if isinstance(s.get("required"), list) and s["required"]:
        out["required"] = list(s["required"])
    return out


def short_description(desc: str) -> str:
    """The first sentence of the method's own description, without BFCL's class blurb and
    its trailing note about Python 3 syntax."""
    m = _TOOL_DESC.search(desc)
    text = (m.group(1) if m else desc).replace("Note that the provided function is in Python 3 syntax.", "").strip()
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first.strip()


def to_toolspec(doc: dict[str, Any], style: str = "full") -> ToolSpec:
    """One BFCL function doc as a ``ToolSpec`` (``style`` is "full" or "compact")."""
    if style not in ("full", "compact"):
        raise ValueError(f"tool_docs must be 'full' or 'compact', got {style!r}")
    full = style == "full"
    params = _schema(doc.get("parameters") or {"type": "dict", "properties": {}}, keep_descriptions=full)
    params["type"] = "object"
    params.setdefault("properties", {})
    desc = doc.get("description", "")
    return ToolSpec(name=doc["name"], description=desc if full else short_description(desc), parameters=params)
