"""Shared fixtures for the tools tests: a real workspace folder with a real outside neighbour."""

from __future__ import annotations

from pathlib import Path

import pytest
from process_probe import gone_within as _gone_within

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


@pytest.fixture(name="gone_within")
def gone_within_fixture():
    return _gone_within
