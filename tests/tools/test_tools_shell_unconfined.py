"""shell where no OS sandbox exists: every command needs the user's approval, asked as its own
kind of approval so a front end that lets confined commands through still asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.tools import UNCONFINED_SHELL, ToolContext, confinement_notice
from hitrate.tools import confine, shell
from hitrate.tools.confine import Availability

NO_SANDBOX = Availability("none", "bubblewrap (bwrap) is not installed")


@pytest.fixture
def unconfined(monkeypatch):
    monkeypatch.setattr(shell, "detect", lambda: NO_SANDBOX)
    monkeypatch.setattr(confine, "detect", lambda: NO_SANDBOX)


def test_without_an_approval_hook_every_command_is_refused(unconfined, registry, workspace: Path) -> None:
    result = registry.execute("shell", {"command": "touch made"}, ToolContext(workspace=workspace))
    assert result.is_error and result.metadata["refused"] is True
    assert "not confined" in result.content and "bubblewrap" in result.content
    assert not (workspace / "made").exists()


def test_each_command_is_asked_as_an_unconfined_shell(unconfined, registry, workspace: Path) -> None:
    asked: list[str] = []

    def approve(tool: str, args: dict) -> bool:
        asked.append(tool)
        return True

    result = registry.execute("shell", {"command": "touch made"}, ToolContext(workspace=workspace, approve=approve))
    assert asked == [UNCONFINED_SHELL]
    assert result.metadata == result.metadata | {"exit_code": 0, "confined": False, "sandbox": "none"}
    assert (workspace / "made").exists()


def test_a_refused_unconfined_command_does_not_run(unconfined, registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, approve=lambda tool, args: tool == "shell")
    result = registry.execute("shell", {"command": "touch made"}, ctx)
    assert result.is_error and not (workspace / "made").exists()


def test_explicit_opt_in_runs_without_asking(unconfined, registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, allow_unconfined_shell=True)
    result = registry.execute("shell", {"command": "echo hi"}, ctx)
    assert result.content == "hi\n[exit code 0]"


def test_the_notice_names_the_reason(unconfined) -> None:
    notice = confinement_notice()
    assert notice is not None and "NOT confined" in notice and "bubblewrap" in notice


def test_detect_reports_a_missing_bwrap(monkeypatch) -> None:
    confine.detect.cache_clear()
    monkeypatch.setattr(confine, "trusted_program", lambda name, **kw: None)
    try:
        found = confine.detect()
        assert not found.confined and "not installed" in found.detail
    finally:
        confine.detect.cache_clear()
