"""The harness's own git call (the dynamic context's git status) on a repository whose config and
hooks the agent planted: none of the planted programs may run, and the summary still works."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from hitrate.harness.dynamic_context import git_summary

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True, capture_output=True)


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    repo, marks = tmp_path / "repo", tmp_path / "marks"
    marks.mkdir()
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("one\n")
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    for name in ("post-index-change", "pre-commit", "reference-transaction"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\ntouch {marks}/hook-{name}\n")
        hook.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", f"touch {marks}/fsmonitor; env > {marks}/fsmonitor-env; echo")
    _git(repo, "config", "filter.evil.clean", f"sh -c 'touch {marks}/filter-clean; cat'")
    _git(repo, "config", "filter.evil.process", f"touch {marks}/filter-process")
    # Same size, new mtime: git must look at the content again (which is where filters and the
    # index refresh, with its post-index-change hook, would come in).
    time.sleep(0.01)
    (repo / "a.txt").write_text("two\n")
    (repo / "b.txt").write_text("new\n")
    return repo, marks


def test_planted_hooks_fsmonitor_and_filters_do_not_run(planted, monkeypatch) -> None:
    repo, marks = planted
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-leak")
    summary = git_summary(repo)
    assert summary == "branch main, 2 changed files"
    assert sorted(os.listdir(marks)) == []


def test_plain_git_status_would_have_run_them(planted) -> None:
    # The control: the same repository under an unprotected `git status` runs the planted fsmonitor.
    repo, marks = planted
    subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, check=False)
    assert os.listdir(marks)
