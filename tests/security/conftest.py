"""Shared fixtures of the security suite: a workspace, a tool context, the default tools."""

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
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, limits=ToolLimits(shell_kill_grace_s=0.3))


@pytest.fixture
def registry():
    return default_tools()
