"""AppWorld's isolated runtime: its own virtualenv, its data folder and where they live.

AppWorld cannot share the SDK's virtualenv (it pins pydantic<2 and httpx<0.28), so it gets one
of its own, created with the standard library's ``venv`` module and filled by pip. The layout
under one *home* folder (default ``~/.cache/coevolve/appworld-<version>``, or
``$COEVOLVE_APPWORLD_HOME``)::

    runtime.json      what was set up (read by the environment)
    venv/             the isolated interpreter with appworld==<pinned> installed
    cache/            APPWORLD_CACHE (``appworld install`` unpacks the package tests here)
    root/             APPWORLD_ROOT: root/data holds the tasks (a link to real data, or the
                      synthetic set), root/experiments the worlds' outputs

Setting up is idempotent: each stage leaves a marker and is skipped when already done, so a
test session or a CI job can call :func:`setup_runtime` every time and pay only once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Callable, Iterator

from pydantic import BaseModel, ConfigDict

from . import APPWORLD_VERSION

__all__ = ["Runtime", "AppWorldRuntimeError", "default_home", "setup_runtime", "load_runtime", "isolated_script"]

SPLITS = ("train", "dev", "test_normal", "test_challenge")


class AppWorldRuntimeError(RuntimeError):
    """The isolated runtime is missing or broken; the message says how to fix it."""


class Runtime(BaseModel):
    """Where AppWorld's interpreter and data are (persisted as ``runtime.json``)."""

    model_config = ConfigDict(extra="forbid")

    home: str
    python: str
    root: str
    cache: str
    appworld_version: str = APPWORLD_VERSION
    data: str | None = None
    synthetic: bool = False

    @property
    def data_dir(self) -> Path:
        return Path(self.root) / "data"

    def subprocess_env(self) -> dict[str, str]:
        """Environment for AppWorld processes: none of the SDK venv's Python settings leak in."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
        env.update(APPWORLD_ROOT=self.root, APPWORLD_CACHE=self.cache, PYTHONNOUSERSITE="1", PYTHONWARNINGS="ignore")
        return env


def default_home() -> Path:
    env = os.environ.get("COEVOLVE_APPWORLD_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "coevolve" / f"appworld-{APPWORLD_VERSION}"


def isolated_script(name: str) -> Path:
    """Path of a script that runs with AppWorld's interpreter (shipped in ``isolated/``)."""
    return Path(__file__).with_name("isolated") / name


def _venv_python(venv_dir: Path) -> Path:
    return venv_dir / "bin" / "python"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """Serialise set-up between processes (two pytest sessions, two CI jobs)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".setup.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: list[str], env: dict[str, str] | None, what: str, log: Callable[[str], None]) -> str:
    log(f"[appworld setup] {what}: {' '.join(cmd)}")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise AppWorldRuntimeError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def setup_runtime(
    home: Path | str | None = None,
    *,
    venv_dir: Path | str | None = None,
    data: Path | str | None = None,
    synthetic: bool = False,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> Runtime:
    """Create (or reuse) AppWorld's virtualenv and data folder; return the runtime.

    ``data``: an existing AppWorld data folder (the real one, from ``appworld download data``
    on a machine with network). ``synthetic``: build the small invented task set instead.
    With neither, only the interpreter is prepared.
    """
    if data is not None and synthetic:
        raise ValueError("pass either data (a real AppWorld data folder) or synthetic=True, not both")
    home = Path(home).expanduser() if home is not None else default_home()
    home = home.absolute()
    vdir = Path(venv_dir).expanduser().absolute() if venv_dir is not None else home / "venv"
    rt = Runtime(home=str(home), python=str(_venv_python(vdir)), root=str(home / "root"), cache=str(home / "cache"))
    with _locked(home):
        Path(rt.root).mkdir(parents=True, exist_ok=True)
        Path(rt.cache).mkdir(parents=True, exist_ok=True)
        marker = vdir / ".coevolve-appworld-installed"
        if not (marker.exists() and marker.read_text().strip() == APPWORLD_VERSION and Path(rt.python).exists()):
            t0 = time.perf_counter()
            log(f"[appworld setup] creating the virtualenv {vdir}")
            venv.EnvBuilder(with_pip=True, clear=vdir.exists()).create(vdir)
            env = rt.subprocess_env()
            _run([rt.python, "-m", "pip", "install", "--disable-pip-version-check", "-q", f"appworld=={APPWORLD_VERSION}"],
                 env, "installing appworld", log)
            _run([str(vdir / "bin" / "appworld"), "install"], env, "unpacking appworld (appworld install)", log)
            marker.write_text(APPWORLD_VERSION)
            log(f"[appworld setup] interpreter ready in {time.perf_counter() - t0:.0f}s")
        data_link = rt.data_dir
        if data is not None:
            src = Path(data).expanduser().absolute()
            if not (src / "tasks").is_dir():
                raise AppWorldRuntimeError(f"{src} is not an AppWorld data folder (it has no tasks/ folder)")
            if data_link.is_symlink() or data_link.exists():
                if data_link.is_symlink():
                    data_link.unlink()
                elif data_link.resolve() != src:
                    raise AppWorldRuntimeError(f"{data_link} already exists and is not a link; remove it to point at {src}")
            if not data_link.exists():
                data_link.symlink_to(src, target_is_directory=True)
            rt.data = str(src)
        elif synthetic:
            if data_link.is_symlink():
                raise AppWorldRuntimeError(f"{data_link} links to real data; use another --home for the synthetic set")
            if not (data_link / "coevolve_synthetic.json").exists():
                if data_link.exists():
                    import shutil

                    shutil.rmtree(data_link)  # a half-built set from an interrupted run
                t0 = time.perf_counter()
                _run([rt.python, str(isolated_script("build_synthetic.py")), "--root", rt.root], rt.subprocess_env(),
                     "building the synthetic task set", log)
                log(f"[appworld setup] synthetic task set built in {time.perf_counter() - t0:.0f}s")
            rt.synthetic = True
            rt.data = str(data_link)
        else:
            previous = _read(home)
            if previous is not None:
                rt.data, rt.synthetic = previous.data, previous.synthetic
        (home / "runtime.json").write_text(rt.model_dump_json(indent=2))
    return rt


def _read(home: Path) -> Runtime | None:
    path = home / "runtime.json"
    if not path.exists():
        return None
    return Runtime.model_validate_json(path.read_text())


def load_runtime(home: Path | str | None = None) -> Runtime:
    """The runtime set up under ``home``; a clear error when there is none."""
    home = Path(home).expanduser() if home is not None else default_home()
    rt = _read(home)
    if rt is None:
        raise AppWorldRuntimeError(
            f"No AppWorld runtime under {home}. Create it with `coevolve appworld setup --synthetic` "
            f"(offline task set) or `coevolve appworld setup --data PATH` (real AppWorld data)."
        )
    if not Path(rt.python).exists():
        raise AppWorldRuntimeError(f"The AppWorld interpreter {rt.python} is gone; run `coevolve appworld setup` again.")
    return rt
