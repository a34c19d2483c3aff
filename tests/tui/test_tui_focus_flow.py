"""Focus and flow: typed text always reaches the prompt, PageUp / PageDown scroll the conversation
from it, the view follows new output, prompts typed during a step are queued, Ctrl-C cancels."""

from __future__ import annotations

import threading

from tui_helpers import SPEC, submit, wait_until

from hitrate.tui.conversation import Conversation, NoticeLine, UserPrompt
from hitrate.tui.dialogs import ConfirmScreen
from hitrate.tui.prompt_input import PromptInput
from hitrate.tui.status import StatusLine
from hitrate.tui.tool_panel import ToolPanel

READ = {"tool_calls": [("read_file", '{"path": "calc.py"}')]}
LONG = "\n\n".join(f"Paragraph {i}: " + "words " * 30 for i in range(12))


def at_bottom(conversation: Conversation) -> bool:
    """The newest output is in view (content shorter than the view sits at its bottom)."""
    return conversation.max_scroll_y == 0 or conversation.scroll_y >= conversation.max_scroll_y - 1


async def test_typed_text_reaches_the_prompt_after_tab_and_pageup(make_app):
    app = make_app({SPEC: [READ, {"text": LONG}]})
    async with app.run_test(size=(100, 30)) as pilot:
        box = app.query_one(PromptInput)
        await submit(pilot, "read it")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the turn")
        conversation = app.conversation
        assert conversation.max_scroll_y > 10 and at_bottom(conversation)  # followed the output

        # Tab keeps the focus in the prompt (and the view where it was).
        await pilot.press("tab")
        assert app.focused is box and at_bottom(conversation)
        # Focus elsewhere (a click on a tool panel's title): typing still lands in the prompt.
        panel_title = app.query_one(ToolPanel).query_one("CollapsibleTitle")
        panel_title.focus()
        await pilot.pause()
        assert app.focused is panel_title
        conversation.scroll_end(animate=False)
        await pilot.pause()
        await pilot.press(*"next ")
        assert app.focused is box and box.value == "next "

        # PageUp from the prompt scrolls the conversation and leaves the focus (and the text) alone.
        bottom = conversation.scroll_y
        await pilot.press("pageup")
        await pilot.pause()
        assert conversation.scroll_y < bottom and app.focused is box
        await pilot.press(*"question")
        assert box.value == "next question"
        await pilot.press("pagedown", "pagedown", "pagedown")
        await pilot.pause()
        assert at_bottom(conversation)


async def test_a_new_prompt_brings_the_view_back_to_the_newest_output(make_app):
    app = make_app({SPEC: [{"text": LONG}, {"text": "Short answer."}]})
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "long one")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the first turn")
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        assert not at_bottom(app.conversation)
        await submit(pilot, "short one")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the second turn")
        await pilot.pause()
        assert at_bottom(app.conversation)


async def test_prompts_typed_during_a_step_are_queued_and_sent_when_it_ends(make_app):
    gate = threading.Event()
    app = make_app({SPEC: [{"text": "Working on it, slowly.", "gate": gate}, {"text": "Second answer."}]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "go")
        await wait_until(pilot, backend.waiting.is_set, "the call to stream")
        await submit(pilot, "and another thing")
        assert app.query_one(PromptInput).value == ""  # taken, not refused
        assert "queued" in str(app.query(NoticeLine).last().render())
        assert "· 1 queued" in app.query_one(StatusLine).full_text
        assert len(backend.prompts) == 0
        gate.set()
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the queued turn")
        assert [w.render().plain for w in app.query(UserPrompt)] == ["go", "and another thing"]
        last_user = backend.prompts[-1].messages[-1]
        assert [b.text for b in last_user.content if b.type == "text"] == ["and another thing"]


async def test_ctrl_c_cancels_the_step_then_asks_to_quit_when_idle(make_app, ledger):
    gate = threading.Event()
    app = make_app({SPEC: [{"text": "A long answer the user stops.", "gate": gate}, {"text": "never"}]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "go")
        await wait_until(pilot, backend.waiting.is_set, "the call to stream")
        await submit(pilot, "queued behind it")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not app.busy, "the cancelled step")
        gate.set()
        assert not isinstance(app.screen, ConfirmScreen)
        assert "step cancelled" in " ".join(str(n.render()) for n in app.query(NoticeLine))
        assert app._queued == [] and len(app.figures.calls) == 1  # the queued prompt was dropped
        rows = ledger.calls(session_id=app.link.session_id)
        assert len(rows) == 1 and rows[0].error.startswith("cancelled")

        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the quit question")
        assert "Quit" in str(app.screen.query_one("#dialog-title").render())
        await pilot.press("n")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the dialog to close")
        assert app.is_running
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the quit question again")
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running, "the app to quit")


async def test_resume_output_is_on_screen(make_app):
    app = make_app({SPEC: [{"text": LONG}, {"text": "again"}]})
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "long one")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn")
        first = app.link.session_id
        await submit(pilot, "/clear")
        await pilot.pause()
        await submit(pilot, "/resume")
        await pilot.pause()
        assert at_bottom(app.conversation)
        await pilot.press("pageup", "pageup")  # the user scrolled up to read the list
        await submit(pilot, f"/resume {first}")
        await wait_until(pilot, lambda: f"resumed session {first}" in str(app.query(NoticeLine).last().render()), "the resume")
        await pilot.pause()
        conversation = app.conversation
        notice = app.query(NoticeLine).last()
        assert at_bottom(conversation) and conversation.max_scroll_y > 0
        assert notice.region.bottom <= conversation.region.bottom and notice.region.y >= conversation.region.y
