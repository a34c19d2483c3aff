"""Tool panels say how a command ended: its exit code in the title (✗ for a failing one, such as a
pytest run with a failure), the output's last lines under the title while the panel is folded,
and Ctrl+O opens the whole output from the prompt box."""

from __future__ import annotations

import json

from tui_helpers import SPEC, submit, wait_until

from hitrate.tui.prompt_input import PromptInput
from hitrate.tui.tool_panel import ToolPanel, preview_lines

FAILING_RUN = """#!/bin/sh
echo "============================= test session starts =============================="
echo "collected 2 items"
echo ""
echo "test_calc.py .F"
echo "FAILED test_calc.py::test_add - assert -1 == 5"
echo "========================= 1 failed, 1 passed in 0.02s =========================="
exit 1
"""


def _shell(command: str) -> dict:
    return {"tool_calls": [("shell", json.dumps({"command": command}))]}


def test_preview_is_the_last_lines_without_the_exit_trailer() -> None:
    output = "a\nb\n\nc\nd\n[exit code 1]"
    assert preview_lines(output) == ["b", "c", "d"]
    assert preview_lines("(no output)\n[exit code 0]") == ["(no output)"]
    assert preview_lines("one\n[killed by signal SIGKILL]") == ["one"]


async def test_a_failing_command_is_a_cross_with_its_exit_code_and_a_preview(make_app, workspace):
    (workspace / "run_tests.sh").write_text(FAILING_RUN)
    script = [_shell("sh run_tests.sh"), _shell("echo ok"), {"text": "One test fails."}]
    app = make_app({SPEC: script})
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "run the tests")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 3, "the turn")
        failing, passing = app.query(ToolPanel)
        assert failing.title == "✗ shell: sh run_tests.sh · exit 1" and failing.state == "error"
        assert failing.has_class("-error") and failing.collapsed
        assert failing.preview_text.splitlines() == [
            "test_calc.py .F",
            "FAILED test_calc.py::test_add - assert -1 == 5",
            "========================= 1 failed, 1 passed in 0.02s ==========================",
        ]
        assert passing.title == "✓ shell: echo ok · exit 0" and passing.preview_text == "ok"
        app.save_screenshot(filename="tool-output-80x24.svg", path=str(workspace.parent))

        # Ctrl+O from the prompt box opens the newest panel's whole output, and folds it again.
        assert app.focused is app.query_one(PromptInput)
        await pilot.press("ctrl+o")
        assert not passing.collapsed and passing.preview_text == ""
        await pilot.press("ctrl+o")
        assert passing.collapsed and app.focused is app.query_one(PromptInput)
