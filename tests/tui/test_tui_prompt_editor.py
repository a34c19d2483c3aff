"""The prompt editor: multi-line prompts, pastes that keep every line, Enter / Ctrl+J, history,
and the external editor."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from textual import events
from tui_helpers import SPEC, wait_until

from hitrate.tui.conversation import NoticeLine, UserPrompt
from hitrate.tui.prompt_input import EditorError, PromptInput, editor_command

TRACE = """Traceback (most recent call last):
  File "calc.py", line 2, in add
    return a - b
TypeError: unsupported operand type(s) for -: 'str' and 'int'"""


def user_texts(app) -> list[str]:
    return [w.render().plain for w in app.query(UserPrompt)]


def sent_prompts(app) -> list[str]:
    backend = app.link.router.backends[SPEC]
    return [b.text for b in backend.prompts[-1].messages[-1].content if getattr(b, "type", "") == "text"]


async def test_pasted_stack_trace_keeps_every_line_and_enter_sends_it(make_app):
    app = make_app({SPEC: [{"text": "It is the subtraction."}]})
    async with app.run_test(size=(100, 30)) as pilot:
        box = app.query_one(PromptInput)
        await pilot.press(*"why?")
        await pilot.press("ctrl+j")
        app.post_message(events.Paste(TRACE))  # what the driver sends for a bracketed paste
        await pilot.pause()
        assert box.value == "why?\n" + TRACE and not app.figures.calls  # a paste never sends
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn")
        assert user_texts(app) == ["why?\n" + TRACE]
        assert sent_prompts(app) == ["why?\n" + TRACE]  # every line reached the model
        assert box.value == ""


async def test_newline_keys_and_history_walk_on_a_multi_line_prompt(make_app):
    app = make_app({SPEC: [{"text": "one"}, {"text": "two"}]})
    async with app.run_test(size=(100, 30)) as pilot:
        box = app.query_one(PromptInput)
        await pilot.press(*"first", "ctrl+j", *"line two", "shift+enter", *"three")
        assert box.value == "first\nline two\nthree"
        # The box grows with its lines.
        assert box.size.height == 3
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn")
        await pilot.press(*"draft")
        await pilot.press("up")
        assert box.value == "first\nline two\nthree"
        # On the last line of a multi-line prompt, up moves the cursor instead of walking history.
        await pilot.press("up")
        assert box.value == "first\nline two\nthree" and box.cursor_location[0] == 1
        await pilot.press("down", "down")
        assert box.value == "draft"


def _fake_editor(tmp_path: Path) -> Path:
    """An editor that appends a line to the file it is given, as a user typing in vim would."""
    script = tmp_path / "fake-editor"
    script.write_text(f"#!{sys.executable}\nimport sys\np = sys.argv[1]\nopen(p, 'a').write('\\nfrom the editor\\n')\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


async def test_ctrl_g_edits_the_prompt_in_the_external_editor(make_app, tmp_path, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", str(_fake_editor(tmp_path)))
    app = make_app({SPEC: []})
    async with app.run_test(size=(100, 30)) as pilot:
        box = app.query_one(PromptInput)
        await pilot.press(*"typed here")
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: "from the editor" in box.value, "the editor's text")
        assert box.value == "typed here\nfrom the editor"
        assert app.focused is box and not app.figures.calls


async def test_missing_editor_is_a_clear_message(make_app, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    with pytest.raises(EditorError, match=r"set \$VISUAL or \$EDITOR"):
        editor_command({})
    assert editor_command({"EDITOR": "code --wait"}) == ["code", "--wait"]
    app = make_app({SPEC: []})
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*"keep me", "ctrl+g")
        await wait_until(pilot, lambda: app.query(NoticeLine).last().has_class("-error"), "the error notice")
        assert "set $VISUAL or $EDITOR" in str(app.query(NoticeLine).last().render())
        assert app.query_one(PromptInput).value == "keep me"


def _burst(app, *keys: str) -> None:
    """Keys (`ctrl+j`, `enter`, or text) as a terminal delivers a fast typist's burst: all queued before any is handled
    (Pilot.press waits for each key to be handled, which hides ordering bugs)."""
    named = {"ctrl+j": "\n", "enter": "\r"}
    for key in keys:
        if key in named:
            app.post_message(events.Key(key, named[key]))
            continue
        for char in key:
            app.post_message(events.Key("space" if char == " " else char, char))


async def test_a_ctrl_j_burst_is_applied_in_the_order_typed(make_app):
    app = make_app({SPEC: []})
    async with app.run_test(size=(80, 24)) as pilot:
        box = app.query_one(PromptInput)
        _burst(app, "line one", "ctrl+j", "line two")
        await pilot.pause()
        await pilot.pause()
        assert box.value == "line one\nline two"
        assert box.cursor_location == (1, len("line two"))


async def test_type_ahead_after_enter_is_the_next_prompt(make_app):
    gate_free = [{"text": "first answer"}, {"text": "second answer"}]
    app = make_app({SPEC: gate_free})
    async with app.run_test(size=(80, 24)) as pilot:
        box = app.query_one(PromptInput)
        _burst(app, "first", "enter", "second")
        await pilot.pause()
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the first turn")
        assert user_texts(app) == ["first"]
        assert box.value == "second"
