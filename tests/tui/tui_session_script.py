"""A three-turn session for the snapshot tests and the README screenshot (tests only)."""

from __future__ import annotations

import json

from tui_helpers import submit, wait_until

EDIT = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
DOC = {"path": "calc.py", "old_string": "def add(a, b):\n", "new_string": 'def add(a, b):\n    """Return the sum of a and b."""\n'}

THREE_TURNS = [
    {"text": "Let me look at `calc.py`.", "tool_calls": [("read_file", '{"path": "calc.py"}')]},
    {"text": "`add` **subtracts**: line 2 returns `a - b`. That is why `test_add` fails."},
    {"tool_calls": [("edit_file", json.dumps(EDIT))]},
    {"tool_calls": [("shell", '{"command": "grep -n return calc.py"}')]},
    {"text": "Fixed. Line 2 now reads `return a + b`."},
    {"tool_calls": [("edit_file", json.dumps(DOC))]},
    {"text": "Added a one-line docstring to `add`."},
]

PROMPTS = [("Why does test_add fail?", 2), ("Fix it and check the file", 5), ("Add a docstring to add", 7)]


async def run_three_turns(pilot) -> None:
    app = pilot.app
    for text, calls in PROMPTS:
        await submit(pilot, text)
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == calls, f"turn {text!r}")


# A working session as issue 16 describes it: a pasted stack trace, a file mention, an undo.
TRACE = """Traceback (most recent call last):
  File "test_calc.py", line 4, in test_add
    assert add(2, 3) == 5
AssertionError: assert -1 == 5"""

WORKDAY_TURNS = [
    {"text": "`add` returns `a - b`: 2 - 3 is -1, hence the failure."},
    {"tool_calls": [("edit_file", json.dumps(EDIT))]},
    {"text": "Fixed: `add` now returns `a + b`."},
    {"text": "Understood: the change is undone, `calc.py` is back as it was."},
]


async def run_workday(pilot) -> None:
    """Paste a trace and ask; mention @calc.py and have it fixed; /undo; a third prompt."""
    from textual import events

    app = pilot.app
    await pilot.press(*"why does this fail?", "ctrl+j")
    app.post_message(events.Paste(TRACE))
    await pilot.pause()
    await pilot.press("enter")
    await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 1, "turn 1")
    await submit(pilot, "fix @calc.py")
    await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 3, "turn 2")
    await submit(pilot, "/undo")
    await pilot.pause()
    await submit(pilot, "I undid it; leave calc.py alone")
    await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 4, "turn 3")
