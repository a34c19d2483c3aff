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
