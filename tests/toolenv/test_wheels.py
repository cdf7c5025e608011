"""A third party's install: the built wheels (not the repository's folders, not editable) in a
fresh virtualenv, resolved offline from dist/, then a few training steps of the kvstore example.

The fresh environment borrows the heavy third-party packages (torch, transformers, ...) of the
project's environment through a folder of links that leaves out every coevolve distribution and
every editable-install hook, so each coevolve module can only come from a wheel."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WANTED = ["coevolve-sdk", "coevolve-grpo", "coevolve-signals", "coevolve-kvstore"]


def third_party_only(dest: Path) -> Path:
    """Links to the project's site-packages entries, minus coevolve's own and .pth hooks."""
    dest.mkdir()
    for sp in site.getsitepackages():
        for entry in Path(sp).iterdir():
            n = entry.name.lower()
            if n.startswith(("coevolve", "__editable__", "_outer")) or n.endswith(".pth") or (dest / entry.name).exists():
                continue
            (dest / entry.name).symlink_to(entry)
    return dest


@pytest.mark.slow
def test_wheels_install_offline_into_a_fresh_venv_and_train(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "build_dists.py"), "--out", str(dist), "--only", ",".join(WANTED)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(list(dist.glob("*.whl"))) == len(WANTED)

    vdir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(vdir)
    py = vdir / "bin" / "python"
    sp = next((vdir / "lib").glob("python3*/site-packages"))
    (sp / "third_party.pth").write_text(str(third_party_only(tmp_path / "third_party")) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COEVOLVE_PLUGIN_MODULES", "VIRTUAL_ENV")}
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--disable-pip-version-check",
                              "--no-index", "--find-links", str(dist), *WANTED], capture_output=True, text=True, timeout=900, env=env)
    assert install.returncode == 0, install.stderr[-3000:]

    where = subprocess.run([str(py), "-c", "import coevolve_sdk, coevolve_grpo, coevolve_kvstore as k; print(coevolve_sdk.__file__); print(k.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(sp)) for line in where.stdout.split()), where.stdout  # from the wheels, not the repository

    listed = subprocess.run([str(py), "-m", "coevolve_sdk", "plugins", "--json"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    components = {(c["kind"], c["name"]): c["distribution"] for c in json.loads(listed.stdout)["components"]}
    assert components[("environment", "kvstore")] == "coevolve-kvstore" and components[("algorithm", "grpo")] == "coevolve-grpo"
    assert ("environment", "bfcl-multi-turn") not in components  # only what was installed

    cfg = yaml.safe_load((REPO / "examples" / "kvstore-tiny.yaml").read_text())
    cfg.update(run_dir=str(tmp_path / "run"), training={"steps": 2, "tasks_per_step": 2, "checkpoint_every": 1},
               evolution={"every": 1}, eval={"split": "test", "max_tasks": 4}, pool={"seed_tasks": 8, "seed_source": "env"})
    cfg["algorithm"]["options"]["warm_start"]["steps"] = 10
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    run = subprocess.run([str(py), "-m", "coevolve_sdk", "run", "run.yaml", "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=1500)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert json.loads(run.stdout[run.stdout.index("{"):])["steps"] == 2
    assert (tmp_path / "run" / "report.html").exists()
