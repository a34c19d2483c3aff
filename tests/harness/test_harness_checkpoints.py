"""Checkpoints for /undo: a turn's created, changed and deleted files come back exactly, in a git
workspace (whose history, index and uncommitted changes stay untouched) and in a plain folder."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from hitrate.harness.checkpoints import Checkpoints


def git(ws: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@x", GIT_COMMITTER_NAME="u", GIT_COMMITTER_EMAIL="u@x")
    return subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True, text=True).stdout


def tree(ws: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted(ws.rglob("*")) if p.is_file() and ".git" not in p.parts}


def user_repo_state(ws: Path) -> tuple[str, ...]:
    index = hashlib.sha256((ws / ".git" / "index").read_bytes()).hexdigest()
    return (git(ws, "status", "--porcelain=v1", "--untracked-files=all"), git(ws, "diff"), git(ws, "diff", "--cached"),
            git(ws, "log", "--format=%H %s"), git(ws, "stash", "list"), index)


def make_files(ws: Path) -> None:
    (ws / "keep.py").write_text("print('keep')\n")
    (ws / "edit.py").write_text("x = 1\n")
    (ws / "gone.py").write_text("y = 2\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "run.sh").chmod(0o755)


def agent_turn(ws: Path) -> None:
    """What a turn's tools and shell commands might do."""
    (ws / "edit.py").write_text("x = 100\n")
    (ws / "gone.py").unlink()
    (ws / "pkg" / "sub").mkdir(parents=True)
    (ws / "pkg" / "sub" / "new.py").write_text("z = 3\n")
    (ws / "run.sh").chmod(0o644)
    subprocess.run("echo made by shell > shell.txt", shell=True, cwd=ws, check=True)


@pytest.mark.parametrize("with_git", [True, False], ids=["git-workspace", "plain-folder"])
def test_undo_restores_exactly_the_last_turns_files(tmp_path: Path, with_git: bool) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make_files(ws)
    if with_git:
        git(ws, "init", "-q")
        git(ws, "add", "-A")
        git(ws, "commit", "-qm", "base")
        # Unrelated uncommitted work of the user: staged, unstaged and untracked.
        (ws / "keep.py").write_text("print('keep, edited by the user')\n")
        (ws / "staged.txt").write_text("staged\n")
        git(ws, "add", "staged.txt")
        (ws / "notes.txt").write_text("untracked notes\n")
        repo_before = user_repo_state(ws)
    files_before = tree(ws)
    modes_before = (ws / "run.sh").stat().st_mode

    checkpoints = Checkpoints(ws, tmp_path / "store")
    before = checkpoints.begin()
    agent_turn(ws)
    turn = checkpoints.end(before, label="refactor")
    assert sorted(checkpoints.changed_paths(turn)) == [
        ("A", "pkg/sub/new.py"), ("A", "shell.txt"), ("D", "gone.py"), ("M", "edit.py"), ("M", "run.sh"),
    ]
    result = checkpoints.undo()
    assert result is not None
    assert sorted(result.restored) == ["edit.py", "gone.py", "run.sh"] and sorted(result.removed) == ["pkg/sub/new.py", "shell.txt"]
    assert result.skipped == [] and result.label == "refactor"
    assert tree(ws) == files_before
    assert (ws / "run.sh").stat().st_mode == modes_before
    assert not (ws / "pkg").exists()  # the folders the turn made are gone too
    if with_git:
        assert user_repo_state(ws) == repo_before
    # The store is outside the workspace, and nothing was added to it.
    assert not any(p.name.startswith("hitrate") for p in ws.rglob("*"))
    assert checkpoints.undo() is None  # nothing more to undo


def test_undo_walks_back_turn_by_turn_and_skips_files_changed_again(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("b\n")
    checkpoints = Checkpoints(ws, tmp_path / "store")
    t1 = checkpoints.begin()
    (ws / "a.txt").write_text("two\n")
    checkpoints.end(t1, "first")
    t2 = checkpoints.begin()
    (ws / "a.txt").write_text("three\n")
    (ws / "b.txt").write_text("b by the agent\n")
    checkpoints.end(t2, "second")
    t3 = checkpoints.begin()
    checkpoints.end(t3, "read only")  # a turn that changed nothing is not an undo step
    # The user edits b.txt after the turn: undo leaves it and says so.
    (ws / "b.txt").write_text("b by the user\n")
    second = checkpoints.undo()
    assert second is not None and second.label == "second"
    assert second.restored == ["a.txt"] and second.skipped == ["b.txt"]
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "b.txt").read_text() == "b by the user\n"
    first = checkpoints.undo()
    assert first is not None and first.label == "first" and (ws / "a.txt").read_text() == "one\n"
    assert checkpoints.undo() is None


def test_gitignored_files_are_not_snapshotted(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".gitignore").write_text("build/\n")
    checkpoints = Checkpoints(ws, tmp_path / "store")
    before = checkpoints.begin()
    (ws / "build").mkdir()
    (ws / "build" / "out.bin").write_bytes(b"\0" * 10)
    (ws / "src.py").write_text("1\n")
    turn = checkpoints.end(before)
    assert checkpoints.changed_paths(turn) == [("A", "src.py")]
