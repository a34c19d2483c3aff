"""/undo in the app: the files of the last turn come back, and the model is told with the next
prompt (an appended block: what it was already sent stays as it was)."""

from __future__ import annotations

import json

from tui_helpers import SPEC, submit, wait_until

from hitrate.harness.checkpoints import Checkpoints
from hitrate.tui.conversation import NoticeLine

FIX = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}


def last_notice(app) -> str:
    return str(app.query(NoticeLine).last().render())


async def test_undo_puts_back_the_last_turns_files_and_tells_the_model(make_app, workspace, tmp_path):
    original = (workspace / "calc.py").read_text()
    app = make_app({SPEC: [
        {"tool_calls": [("edit_file", json.dumps(FIX))]},
        {"tool_calls": [("write_file", '{"path": "tests/test_calc.py", "content": "def test(): pass\\n"}')]},
        {"text": "Fixed and tested."},
        {"text": "Understood."},
    ]}, checkpoints=Checkpoints(workspace, tmp_path / "checkpoints"))
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/undo")
        await pilot.pause()
        assert "nothing to undo" in last_notice(app)
        await submit(pilot, "fix add and add a test")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 3, "the turn")
        assert (workspace / "tests" / "test_calc.py").exists() and (workspace / "calc.py").read_text() != original
        head_before = backend.prompts[-1].messages

        await submit(pilot, "/undo")
        await pilot.pause()
        assert (workspace / "calc.py").read_text() == original
        assert not (workspace / "tests").exists()
        assert "restored calc.py" in last_notice(app) and "removed tests/test_calc.py" in last_notice(app)

        await submit(pilot, "ok, leave it")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 4, "the next turn")
        sent = backend.prompts[-1].messages
        # Everything sent before is unchanged; the note rides in the new user block, after the prompt.
        assert sent[: len(head_before)] == head_before
        texts = [b.text for b in sent[-1].content if b.type == "text"]
        assert texts[0].startswith("ok, leave it\n\n[The user undid the file changes of an earlier turn: restored calc.py")
        await submit(pilot, "/undo")
        await pilot.pause()
        assert "nothing to undo" in last_notice(app)
