"""Versioned prompt templates: one Markdown file per stage and version.

Files are ``<stage>-<version>.md`` in this package's ``templates/`` folder, or in a folder of
your own searched first (option ``prompt_dir``). The version is an option of the teacher and is
written into the lineage of every task it proposes, with a hash of the template, so a task can
always be traced to the exact prompt that produced it. Templates are checked when they load:
an unknown placeholder or a missing part is an error at construction, not halfway through a
run. Placeholders (``{{name}}``) are filled in one pass, so text from the environment or the
agent is never expanded a second time.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from coevolve_sdk import ConfigError

__all__ = ["Prompt", "PromptSet", "DEFAULT_ACTION_FORMAT", "clip"]

#: How actions look unless the environment says otherwise (its ``action_format`` attribute).
DEFAULT_ACTION_FORMAT = (
    "Call one tool per action, as a JSON object inside tool_call tags:\n"
    '<tool_call>{"name": "<tool name>", "arguments": {"<argument>": <value>}}</tool_call>\n'
    "To call several tools in one action, write several such blocks one after another."
)

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PACKAGE_PROMPTS = "templates"


def clip(text: Any, n: int) -> str:
    """``text`` cut to ``n`` characters, saying how much was left out (prompts and messages)."""
    s = str(text)
    return s if len(s) <= n else s[: n - 20] + f" ...[{len(s) - n + 20} more chars]"


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str
    sha: str

    def render(self, **values: str) -> list[dict[str, str]]:
        msgs = []
        if self.system.strip():
            msgs.append({"role": "system", "content": _fill(self.system, values, self.name)})
        msgs.append({"role": "user", "content": _fill(self.user, values, self.name)})
        return msgs


def _fill(template: str, values: dict[str, str], name: str) -> str:
    """Substitute ``{{key}}`` in one pass: inserted text is never scanned again."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise ConfigError(f"prompt template '{name}' uses {{{{{key}}}}}, which the teacher does not provide")
        return str(values[key])

    return _PLACEHOLDER.sub(sub, template)


class PromptSet:
    """The templates of one ``prompt_version``, from a user folder first, then the package.

    Files are ``<stage>-<version>.md``. ``reflect``, ``explore``, ``abstract`` and ``judge`` hold a
    ``<!-- system -->`` part and a ``<!-- user -->`` part; ``guidance-<kind>`` is one block.
    """

    STAGES: ClassVar[dict[str, set[str]]] = {
        "reflect": {"signal_kind", "signal_reason", "signal_evidence", "task_query", "trajectory", "outcome"},
        "explore": {"action_format", "guidance", "opening", "tools", "history"},
        "abstract": {"min_actions", "max_actions", "max_candidates", "action_format", "signal_kind", "context", "task_query", "tools", "runs"},
        "judge": {"description", "query", "modality", "reference", "trajectory", "final_observation"},
    }

    def __init__(self, version: str, prompt_dir: str | Path | None = None) -> None:
        self.version = version
        self.prompt_dir = Path(prompt_dir) if prompt_dir else None
        if self.prompt_dir is not None and not self.prompt_dir.is_dir():
            raise ConfigError(f"prompt_dir {self.prompt_dir} is not a folder. Point it at a folder of <stage>-<version>.md files.")
        self._cache: dict[str, Prompt | None] = {}
        self._lock = threading.Lock()
        for stage in self.STAGES:  # fail at construction, not halfway through a run
            self.get(stage)
        self.guidance("generic")

    def _read(self, stem: str) -> str | None:
        fname = f"{stem}-{self.version}.md"
        if self.prompt_dir is not None and (self.prompt_dir / fname).is_file():
            return (self.prompt_dir / fname).read_text(encoding="utf-8")
        res = resources.files("coevolve_litellm").joinpath(_PACKAGE_PROMPTS, fname)
        if res.is_file():
            return res.read_text(encoding="utf-8")
        return None

    def _load(self, stem: str, staged: bool) -> Prompt | None:
        with self._lock:
            if stem in self._cache:
                return self._cache[stem]
            text = self._read(stem)
            prompt = None
            if text is not None:
                sha = hashlib.sha256(text.encode()).hexdigest()[:12]
                if staged:
                    if "<!-- user -->" not in text:
                        raise ConfigError(f"prompt {stem}-{self.version}.md has no '<!-- user -->' line separating the user part")
                    system, user = text.split("<!-- user -->", 1)
                    system = system.replace("<!-- system -->", "", 1).strip()
                    prompt = Prompt(stem, system, user.strip(), sha)
                    allowed = self.STAGES.get(stem, set())
                    unknown = {m.group(1) for m in _PLACEHOLDER.finditer(text)} - allowed
                    if unknown:
                        raise ConfigError(
                            f"prompt {stem}-{self.version}.md uses unknown placeholders {sorted(unknown)}; allowed: {sorted(allowed)}"
                        )
                else:
                    unknown = {m.group(1) for m in _PLACEHOLDER.finditer(text)} - {"context", "signal_kind"}
                    if unknown:
                        raise ConfigError(f"guidance {stem}-{self.version}.md uses unknown placeholders {sorted(unknown)}; allowed: context, signal_kind")
                    prompt = Prompt(stem, "", text.strip(), sha)
            self._cache[stem] = prompt
            return prompt

    def get(self, stage: str) -> Prompt:
        p = self._load(stage, staged=True)
        if p is None:
            where = f"{self.prompt_dir} or " if self.prompt_dir else ""
            raise ConfigError(f"no prompt template {stage}-{self.version}.md in {where}the package's prompts folder")
        return p

    def guidance(self, kind: str) -> Prompt:
        """The guidance template for a signal kind; ``guidance-generic`` for kinds without one."""
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", kind)
        p = self._load(f"guidance-{safe}", staged=False)
        if p is None:
            p = self._load("guidance-generic", staged=False)
        if p is None:
            raise ConfigError(f"no guidance template guidance-generic-{self.version}.md; it is required as the fallback")
        return p
