"""Shared fixtures for the tools tests: a real workspace folder with a real outside neighbour."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.tools import ToolContext, ToolLimits, default_tools


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace holding a secret no tool may reach."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("TOP SECRET\n")
    return folder


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, limits=ToolLimits(shell_kill_grace_s=0.3))


@pytest.fixture
def registry():
    return default_tools()


def processes_running(argument: str) -> list[int]:
    """Host pids of live processes with `argument` in their command line.

    A confined command runs in its own PID namespace, so the pids it sees are not the host's:
    tests find its processes by a distinctive argument instead (e.g. `sleep 61.25`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argument.encode() in args and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def gone_within(argument: str, seconds: float = 3.0) -> bool:
    """True once no live process has `argument` in its command line (waiting up to `seconds`)."""
    import time

    end = time.monotonic() + seconds
    while processes_running(argument):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(name="gone_within")
def gone_within_fixture():
    return gone_within
