"""Execute the code blocks of a documentation page, in order, the way a reader would.

Conventions in the Markdown (HTML comments, invisible on the site):

* ``<!-- file: PATH -->`` before a fenced block: write the block to PATH (relative to the work
  folder) instead of running it;
* ``<!-- needs: gpu -->`` / ``<!-- needs: api-key -->`` / ``<!-- skip: reason -->`` before a
  block: do not run it (the page says why);
* other ``python`` blocks run with the page's Python, ``bash`` blocks with bash -e;
* ``text`` blocks are output or layouts, not code.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import textwrap
import venv
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"(?:<!--\s*(?P<marker>[a-z-]+):\s*(?P<arg>[^>]*?)\s*-->\s*\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)```", re.DOTALL)
RUNNABLE = {"python", "bash", "sh", "console"}
DATA = {"yaml", "toml", "json", "jinja"}


@dataclass
class Block:
    lang: str
    body: str
    marker: str | None
    arg: str | None


def blocks(page: Path) -> list[Block]:
    return [Block(m["lang"], m["body"], m["marker"], m["arg"]) for m in FENCE.finditer(page.read_text())]


def unmarked_data_blocks(page: Path) -> list[str]:
    """Code that is neither run, written to a file, nor marked as needing something."""
    return [b.body[:60] for b in blocks(page) if b.lang in DATA and b.marker is None]


def overlay_env(root: Path) -> dict[str, str]:
    """A fresh virtualenv that sees this interpreter's packages through a .pth file, so that a
    tutorial's `pip install` lands in a throwaway place, never in the project's environment."""
    vdir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(vdir)
    sp = next((vdir / "lib").glob("python3*/site-packages"))
    outer = [p for p in site.getsitepackages() if Path(p).exists()]
    (sp / "_outer.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in outer) + "\n")
    py = vdir / "bin" / "python"
    (vdir / "bin" / "pip").write_text(f"#!/bin/sh\nexec {sys.executable} -m pip --python {py} \"$@\"\n")
    (vdir / "bin" / "coevolve").write_text(f"#!/bin/sh\nexec {py} -m coevolve_sdk \"$@\"\n")
    for name in ("pip", "coevolve"):
        (vdir / "bin" / name).chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{vdir / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(vdir)
    env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    return env


def run_bounded(cmd: list[str], *, timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(cmd, capture_output=True, text=True)`` in a session of its own, so that a
    timeout stops what the command started too: a block ``bash -c "coevolve run ..."`` that
    times out would otherwise leave its ``coevolve run`` training on the cores the rest of the
    suite needs (subprocess.run kills only the bash)."""
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs)  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_page(page: Path, work: Path, timeout: int = 900) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    env = overlay_env(work)
    py = work / "venv" / "bin" / "python"
    outputs = []
    for i, b in enumerate(blocks(page)):
        if b.marker == "file":
            target = work / b.arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.body)
            continue
        if b.marker in ("needs", "skip") or b.lang not in RUNNABLE:
            continue
        if b.lang == "python":
            cmd = [str(py), "-c", textwrap.dedent(b.body)]
        else:
            cmd = ["bash", "-e", "-o", "pipefail", "-c", b.body]
        r = run_bounded(cmd, cwd=work, env=env, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"{page.name}: block {i} ({b.lang}) failed with {r.returncode}:\n{b.body}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")
        outputs.append(r.stdout)
    return outputs
