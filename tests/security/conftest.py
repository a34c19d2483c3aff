"""Shared fixtures of the security suite: a workspace, a tool context, the default tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The grading attacks build their tasks with the eval tests' task factory.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evals"))

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


@pytest.fixture
def make_task(tmp_path: Path):
    from evals_task_factory import write_task

    suite = tmp_path / "suite"
    suite.mkdir()

    def make(task_id: str = "fix-add", **kwargs: object) -> Path:
        return write_task(suite, task_id, **kwargs)  # type: ignore[arg-type]

    return make
