"""`@path` mentions (with Tab completion) and `/add FILE`: the file goes out after the prompt, in
the new user message; everything sent before stays the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import SPEC, submit, wait_until

from hitrate.tui.conversation import NoticeLine, UserPrompt
from hitrate.tui.mentions import MAX_FILE_BYTES, MentionError, complete, file_block, mentioned_paths
from hitrate.tui.prompt_input import PromptInput

CALC_BLOCK = '<file path="calc.py">\ndef add(a, b):\n    return a - b\n</file>'


def test_mentions_blocks_and_completion(workspace: Path, tmp_path: Path) -> None:
    assert mentioned_paths("see @calc.py, mail a@b.com and @calc.py again; @src/") == ["calc.py", "src/"]
    assert file_block(workspace, "calc.py") == CALC_BLOCK
    (tmp_path / "secret.txt").write_text("no")
    with pytest.raises(MentionError, match="outside|escapes|not inside|workspace"):
        file_block(workspace, "../secret.txt")
    (workspace / "blob.bin").write_bytes(b"\0\1\2")
    with pytest.raises(MentionError, match="binary"):
        file_block(workspace, "blob.bin")
    (workspace / "big.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(MentionError, match="over the"):
        file_block(workspace, "big.txt")
    (workspace / "src").mkdir()
    (workspace / "src" / "alpha.py").write_text("")
    (workspace / "src" / "alps.py").write_text("")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "calcx").write_text("")
    assert complete(workspace, "ca") == ("calc.py", ["calc.py"])
    assert complete(workspace, "s") == ("src/", ["src/"])
    assert complete(workspace, "src/al") == ("src/alp", ["src/alpha.py", "src/alps.py"])
    assert complete(workspace, "lps") == ("src/alps.py", ["src/alps.py"])  # anywhere in the path
    assert complete(workspace, "zzz") == ("zzz", [])


def same_head(before, after) -> bool:
    """Tools, system and docs unchanged; the earlier messages a prefix of the new ones."""
    return (after.tools == before.tools and after.system == before.system and after.docs == before.docs
            and after.messages[: len(before.messages)] == before.messages)


async def test_tab_completes_a_mention_and_the_file_goes_after_the_prompt(make_app):
    app = make_app({SPEC: [{"text": "Hello."}, {"text": "It subtracts."}]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "hi")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the first turn")
        first = backend.prompts[-1]
        box = app.query_one(PromptInput)
        await pilot.press(*"what does @ca")
        await pilot.press("tab")
        assert box.value == "what does @calc.py " and app.focused is box
        await pilot.press(*"do?", "enter")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the second turn")
        second = backend.prompts[-1]
        assert same_head(first, second)
        texts = [b.text for b in second.messages[-1].content if b.type == "text"]
        assert texts[0] == "what does @calc.py do?\n\n" + CALC_BLOCK
        # The conversation shows what was typed, and says which file went with it.
        assert app.query(UserPrompt).last().render().plain == "what does @calc.py do?"
        assert any("with 1 mentioned file(s): calc.py" in str(n.render()) for n in app.query(NoticeLine))


async def test_add_sends_a_file_with_the_next_prompt_and_bad_mentions_are_not_sent(make_app, workspace):
    (workspace / "blob.bin").write_bytes(b"\0\1")
    app = make_app({SPEC: [{"text": "Seen."}]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/add calc.py nothere.py")
        await pilot.pause()
        notices = [str(n.render()) for n in app.query(NoticeLine)]
        assert "calc.py (2 lines) will be sent with your next prompt" in notices
        assert any("nothere.py" in n and "no such file" in n for n in notices)
        # A mention that cannot be sent stops the prompt and gives it back to edit.
        await submit(pilot, "look at @blob.bin")
        await pilot.pause()
        assert not app.figures.calls and app.query_one(PromptInput).value == "look at @blob.bin"
        assert "binary" in str(app.query(NoticeLine).last().render())
        await submit(pilot, "review it")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn")
        texts = [b.text for b in backend.prompts[-1].messages[-1].content if b.type == "text"]
        assert texts[0] == "review it\n\n" + CALC_BLOCK
