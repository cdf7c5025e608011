"""Install bfcl-eval the way this plugin needs it: the pinned release, without its deps.

pip cannot say "this requirement, but not its dependencies" inside a package's metadata, and
bfcl-eval's declared dependencies include torch (a multi-GB CUDA build by default), every
provider SDK and sentence-transformers. The multi-turn backends and checker need none of
them; the plugin's own dependencies (filelock, mpmath) cover what they do need. Run::

    python -m coevolve_bfcl.install          # installs bfcl-eval==<pinned> --no-deps
    python -m coevolve_bfcl.install --check  # only report whether it is importable
    python -m coevolve_bfcl.install --quiet  # the same in one line of output (make setup)
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from ._bfcl import BFCL_EVAL_VERSION


def installed_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("bfcl-eval")
    except PackageNotFoundError:
        return None


def command(quiet: bool = False) -> list[str]:
    return [sys.executable, "-m", "pip", "install", *(["-q"] if quiet else []), "--no-deps", f"bfcl-eval=={BFCL_EVAL_VERSION}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m coevolve_bfcl.install", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report the installed version")
    ap.add_argument("--quiet", action="store_true", help="one line of output (pip's own progress is silenced)")
    args = ap.parse_args(argv)
    have = installed_version()
    if args.check:
        print(f"bfcl-eval {have or 'not installed'} (this plugin is tested with {BFCL_EVAL_VERSION})")
        return 0 if have else 1
    if have == BFCL_EVAL_VERSION:
        print(f"bfcl-eval {have} is already installed")
        return 0
    if args.quiet:
        print(f"installing bfcl-eval {BFCL_EVAL_VERSION} without its dependencies (the multi-turn suite needs none of them)")
    else:
        print("running:", " ".join(command()))
    return subprocess.call(command(args.quiet))


if __name__ == "__main__":
    raise SystemExit(main())
