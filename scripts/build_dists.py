"""Build a wheel of every distribution in this repository: the core and each plugin.

``make dist`` runs it (wheels land in ``dist/``). Each distribution is built from a clean copy
of its folder, because setuptools reuses an in-tree ``build/`` folder and would ship files that
were deleted or moved since the last build. The build runs without build isolation, with the
setuptools and wheel of the Python that runs this script, so it works offline.

    python scripts/build_dists.py [--out dist] [--only coevolve-sdk,coevolve-grpo]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: never copied: build outputs, environments, caches, run folders
SKIP = shutil.ignore_patterns(".venv", "venv", "build", "dist", "runs", ".cache", "*.egg-info", "__pycache__", ".git",
                              "site", ".pytest_cache", ".hypothesis", "*.pyc")
#: folders of the repository root that are not part of the core distribution
NOT_CORE = {"plugins", "examples", "tests", "docs", "bench", "scripts"}


def distributions() -> dict[str, Path]:
    """Distribution name -> folder, for the core and every plugin with a pyproject.toml."""
    folders = [REPO, *sorted(REPO.glob("plugins/*/")), *sorted(REPO.glob("examples/plugins/*/"))]
    out: dict[str, Path] = {}
    for folder in folders:
        pyproject = folder / "pyproject.toml"
        if pyproject.exists():
            out[tomllib.loads(pyproject.read_text())["project"]["name"]] = folder
    return out


def build(name: str, folder: Path, out: Path, python: str) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"dist-{name}-") as tmp:
        src = Path(tmp) / name
        if folder == REPO:
            src.mkdir()
            for item in folder.iterdir():
                if item.name in NOT_CORE or SKIP(str(folder), [item.name]):
                    continue
                (shutil.copytree(item, src / item.name, ignore=SKIP) if item.is_dir() else shutil.copy2(item, src / item.name))
        else:
            shutil.copytree(folder, src, ignore=SKIP)
        before = set(out.glob("*.whl"))
        r = subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check", "-q",
                            "-w", str(out), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"building {name} from {folder} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        made = sorted(set(out.glob("*.whl")) - before)
        if not made:  # the same file name already existed: pip overwrote it
            made = sorted(out.glob(name.replace("-", "_") + "-*.whl"))
        return made[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "dist", help="folder for the wheels (default: dist/)")
    ap.add_argument("--only", default="", help="comma-separated distribution names (default: all)")
    args = ap.parse_args(argv)
    dists = distributions()
    wanted = [x.strip() for x in args.only.split(",") if x.strip()] or list(dists)
    unknown = sorted(set(wanted) - set(dists))
    if unknown:
        print(f"unknown distribution(s): {', '.join(unknown)}; this repository has: {', '.join(dists)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name in wanted:
        wheel = build(name, dists[name], args.out.resolve(), sys.executable)
        print(f"{name:22s} {wheel.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
