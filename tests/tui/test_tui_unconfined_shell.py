"""Without an OS sandbox the app asks about every shell command, even with approvals off, and
says at start that the shell is not confined."""

from __future__ import annotations

import pytest
from tui_helpers import SPEC, submit, wait_until

from hitrate.tools import confine, shell
from hitrate.tools.confine import Availability
from hitrate.tui.conversation import NoticeLine
from hitrate.tui.dialogs import ApprovalScreen

NO_SANDBOX = Availability("none", "bubblewrap (bwrap) is not installed")


@pytest.fixture
def unconfined(monkeypatch):
    monkeypatch.setattr(shell, "detect", lambda: NO_SANDBOX)
    monkeypatch.setattr(confine, "detect", lambda: NO_SANDBOX)


async def test_an_unconfined_shell_command_is_asked_even_with_approvals_off(unconfined, make_app, workspace):
    app = make_app({SPEC: [{"tool_calls": [("shell", '{"command": "echo hi > made.txt"}')]}, {"text": "Done."}]}, approvals=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert any("NOT confined" in str(n.render()) for n in app.query(NoticeLine))
        await submit(pilot, "make a file")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval dialog")
        assert "shell (unconfined)" in str(app.screen.query_one("#dialog-title").render())
        # Once or not at all: no rule can let an unconfined command through later.
        assert not app.screen.query("#session") and not app.screen.query("#always")
        await pilot.press("a")
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("n", "enter")
        await wait_until(pilot, lambda: not app.busy, "the turn to end")
        assert not (workspace / "made.txt").exists()
