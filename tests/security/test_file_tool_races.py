"""Attacks on the file tools: a symlink swapped in between the path check and the open, and
writes into `.git` internals that make the next git command run the attacker's program."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRIES = 20000
WITHIN_S = 10.0


# Flip ws/d between a real folder and a symlink to the outside folder, as fast as possible, in
# another process (a thread would mostly swap while the tool waits for the GIL, hiding the race).
SWAPPER = """
import os, shutil, sys
ws, outside = sys.argv[1], sys.argv[2]
d, parked = os.path.join(ws, "d"), os.path.join(ws, "d.parked")

def clear():  # write_file may recreate d (make_parents) in a gap: take it back
    if os.path.islink(d):
        os.unlink(d)
    elif os.path.exists(d):
        shutil.rmtree(d, ignore_errors=True)

while True:
    os.rename(d, parked)
    try:
        os.symlink(outside, d)
        os.unlink(d)
    except OSError:
        pass
    while os.path.lexists(parked):
        clear()
        try:
            os.rename(parked, d)
        except OSError:
            pass
"""


@pytest.fixture
def racing(workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("TOP SECRET\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside\n")
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(workspace), str(outside)])
    yield outside
    assert proc.poll() is None, "the swapper stopped: the race was not run"
    proc.kill()
    proc.wait()


@pytest.mark.timeout(60)
def test_read_file_never_follows_a_swapped_symlink(registry, ctx, racing: Path) -> None:
    end = time.monotonic() + WITHIN_S
    read_inside = 0
    for _ in range(TRIES):
        result = registry.execute("read_file", {"path": "d/f.txt"}, ctx)
        assert "TOP SECRET" not in result.content
        read_inside += "inside" in result.content
        if time.monotonic() > end:
            break
    assert read_inside > 0  # the tool still works between swaps


@pytest.mark.timeout(60)
def test_write_file_never_follows_a_swapped_symlink(registry, ctx, racing: Path) -> None:
    end = time.monotonic() + WITHIN_S
    for i in range(TRIES):
        registry.execute("write_file", {"path": "d/f.txt", "content": f"written {i}\n"}, ctx)
        assert (racing / "f.txt").read_text() == "TOP SECRET\n"
        assert not (racing / "d").exists()
        if time.monotonic() > end:
            break


@pytest.mark.timeout(60)
def test_edit_file_never_follows_a_swapped_symlink(registry, ctx, racing: Path, workspace: Path) -> None:
    (racing / "f.txt").write_text("inside\n")  # same text outside, so the edit would apply there
    end = time.monotonic() + WITHIN_S
    for i in range(TRIES):
        registry.execute("edit_file", {"path": "d/f.txt", "old_string": "inside", "new_string": "inside"[:5] + "e"}, ctx)
        assert (racing / "f.txt").read_text() == "inside\n"
        if time.monotonic() > end:
            break


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", ".git/hooks/new-hook", "sub/.git/config"])
def test_git_internals_cannot_be_written(registry, ctx, workspace: Path, path: str) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (workspace / "sub" / ".git").mkdir(parents=True)
    result = registry.execute("write_file", {"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}, ctx)
    assert result.is_error and "read-only" in result.content
    assert "fsmonitor" not in (workspace / ".git" / "config").read_text()


def test_git_internals_cannot_be_edited_or_reached_through_a_link(registry, ctx, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (workspace / "gitdir").symlink_to(workspace / ".git")
    edit = registry.execute("edit_file", {"path": ".git/config", "old_string": "bare = false", "new_string": "fsmonitor = x"}, ctx)
    through_link = registry.execute("write_file", {"path": "gitdir/config", "content": "x"}, ctx)
    assert edit.is_error and through_link.is_error
    assert (workspace / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    # Reading stays allowed: the agent may look at its repository.
    assert "bare = false" in registry.execute("read_file", {"path": ".git/config"}, ctx).content


def test_a_huge_error_text_is_capped(registry, workspace: Path) -> None:
    from hitrate.tools import Tool, ToolArgs, ToolContext, ToolError, ToolLimits
    from hitrate.tools.registry import ToolRegistry

    class Exploding(Tool[ToolArgs]):
        name = "explode"
        description = "fails with a 5 MB message"
        args_model = ToolArgs

        def run(self, args, ctx):
            raise ToolError("E" * 5_000_000)

    ctx = ToolContext(workspace=workspace, limits=ToolLimits(output_max_chars=30_000))
    result = ToolRegistry([Exploding()]).execute("explode", {}, ctx)
    assert result.is_error and len(result.content) <= 30_000 and "cut from the middle" in result.content


@pytest.mark.timeout(60)
def test_python_grep_never_follows_a_swapped_symlink(ctx, racing: Path) -> None:
    from hitrate.tools.grep import GrepTool
    from hitrate.tools.registry import ToolRegistry

    python_grep = ToolRegistry([GrepTool(ripgrep=None)])
    end = time.monotonic() + WITHIN_S / 2
    for _ in range(TRIES):
        result = python_grep.execute("grep", {"pattern": "SECRET", "path": "."}, ctx)
        assert "TOP SECRET" not in result.content
        if time.monotonic() > end:
            break


@pytest.mark.timeout(60)
def test_a_very_long_path_is_checked_in_linear_time(registry, ctx) -> None:
    path = "/a" * 200_000  # absolute, outside the workspace: refused, but quickly
    began = time.monotonic()
    result = registry.execute("read_file", {"path": path}, ctx)
    assert result.is_error and time.monotonic() - began < 5


def test_a_file_that_grew_after_its_size_check_is_not_read_past_the_cap(registry, workspace: Path, monkeypatch) -> None:
    import io

    from hitrate.tools import ToolContext, ToolLimits
    from hitrate.tools.sandbox import Sandbox

    (workspace / "grows.log").write_text("small\n")
    real_open = Sandbox.open_read

    def grown(self, path):
        handle, info = real_open(self, path)
        handle.close()
        # Checked at 6 bytes; 5 MB by the time it is read.
        return io.BufferedReader(io.BytesIO(b"small\n" + b"x" * 5_000_000)), info

    monkeypatch.setattr(Sandbox, "open_read", grown)
    ctx = ToolContext(workspace=workspace, limits=ToolLimits(read_max_file_bytes=1_000_000))
    result = registry.execute("read_file", {"path": "grows.log"}, ctx)
    assert result.is_error and "grew past" in result.content
