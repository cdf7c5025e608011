"""What a run records about where it ran (coevolve_sdk/storage/machine.py): the commit of the
code is read from the checkout's files, for a branch, a packed ref and a worktree alike."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from coevolve_sdk.storage.machine import machine_facts, source_commit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def checkout(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / "coevolve_sdk").mkdir(parents=True)
    (repo / "coevolve_sdk" / "__init__.py").write_text("")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo, git(repo, "rev-parse", "HEAD")


def test_the_commit_of_a_branch_a_packed_ref_and_a_detached_worktree(tmp_path: Path) -> None:
    repo, first = checkout(tmp_path)
    assert source_commit(repo / "coevolve_sdk") == first  # .git/HEAD -> refs/heads/main
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert source_commit(repo / "coevolve_sdk") == first  # from packed-refs
    (repo / "coevolve_sdk" / "x.py").write_text("")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "second")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"), first)
    assert source_commit(tmp_path / "wt" / "coevolve_sdk") == first  # a worktree's .git file, detached HEAD
    git(tmp_path / "wt", "checkout", "-q", "-b", "side")
    assert source_commit(tmp_path / "wt" / "coevolve_sdk") == first  # its branch, a ref in the common dir
    assert source_commit(repo / "coevolve_sdk") == second


def test_no_checkout_no_commit(tmp_path: Path) -> None:
    (tmp_path / "site" / "coevolve_sdk").mkdir(parents=True)
    assert source_commit(tmp_path / "site" / "coevolve_sdk") is None  # an installed package
    (tmp_path / "site" / ".git").write_text("not a gitdir line")
    assert source_commit(tmp_path / "site" / "coevolve_sdk") is None


def test_the_facts_name_this_process_and_never_import_torch_for_it() -> None:
    import os
    import sys

    code = ("import sys; from coevolve_sdk.storage.machine import machine_facts; f = machine_facts(); "
            "print('torch' in sys.modules, 'torch_cpu_kernels' in f, f['cores'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", str(os.cpu_count())]
    facts = machine_facts()
    assert facts["packages"].get("coevolve-sdk") and facts["python"]
