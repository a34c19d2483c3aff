"""Slash commands in the running app: /help, /cost, /model (warning, then confirm), /effort, /clear,
/resume, /approve, and bad input."""

from __future__ import annotations

from tui_helpers import SPEC, submit, wait_until

from hitrate.tui.cache_panel import CallBar
from hitrate.tui.conversation import AssistantText, NoticeLine, UserPrompt
from hitrate.tui.dialogs import ConfirmScreen, HelpScreen
from hitrate.tui.status import StatusLine

OPUS = "anthropic/claude-opus-4-6"


def notices(app) -> list[str]:
    return [str(n.render()) for n in app.query(NoticeLine)]


def markdown_blocks(app) -> list[str]:
    return [m.source for m in app.query(".notice-md")]


async def one_turn(pilot, text: str, calls: int) -> None:
    await submit(pilot, text)
    await wait_until(pilot, lambda: not pilot.app.busy and len(pilot.app.figures.calls) == calls, f"turn {text!r}")


async def test_help_opens_over_the_conversation_and_leaves_it_as_it_was(make_app):
    app = make_app({SPEC: []})
    async with app.run_test(size=(80, 24)) as pilot:
        before = len(app.conversation.children)
        await submit(pilot, "/help")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = app.screen.source
        for usage in ("/model <spec>", "/cost", "/clear", "/resume [session-id]", "/approve on|off", "/help"):
            assert f"`{usage}`" in text
        assert "`esc`" in text and "cancel the current step" in text and "`ctrl+o`" in text
        # Nothing was added to the transcript; Esc closes the help and the prompt box has the keys.
        assert len(app.conversation.children) == before and not markdown_blocks(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help to close")
        assert app.focused is app.query_one("#prompt")
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help from F1")
        await pilot.press("f1")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen), "F1 to close it")
        assert len(app.conversation.children) == before


async def test_model_switch_without_a_key_is_refused_before_any_cost_question(make_app):
    app = make_app({SPEC: []})
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "/model deepseek/deepseek-chat")
        await pilot.pause()
        assert "needs an API key: set DEEPSEEK_API_KEY" in notices(app)[-1]
        assert not isinstance(app.screen, ConfirmScreen) and app.link.model_label == SPEC


async def test_model_switch_warns_with_its_cache_cost_then_confirms(make_app, ledger):
    app = make_app({SPEC: [{"text": "On sonnet."}], OPUS: [{"text": "On opus."}]})
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "hello", 1)
        prompt_tokens = app.figures.last.usage.prompt_tokens

        await submit(pilot, f"/model {OPUS}")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        warning = notices(app)[-1]
        assert "starts a new cache epoch" in warning
        assert f"{prompt_tokens / 1000:.1f}k-token prefix" in warning
        # The prefix is below opus 4.6's 4,096-token minimum: no cache write is promised.
        assert "fresh input: below its 4,096-token cache minimum" in warning and "extra for the switch: ≈ $" in warning
        # Declining keeps the model.
        await pilot.press("n")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the dialog to close")
        assert app.link.model_label == SPEC and notices(app)[-1] == f"kept {SPEC}"

        await submit(pilot, f"/model {OPUS}")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog again")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.link.model_label == OPUS and not app.busy, "the switch")
        assert "new cache epoch" in notices(app)[-1]
        assert "claude-opus-4-6" in app.query_one(StatusLine).full_text
        assert "nothing cached yet" in app.query_one(StatusLine).full_text

        await one_turn(pilot, "again", 2)
        assert any(n.startswith("cache epoch 1: model switched by the user") for n in notices(app))
        rows = ledger.calls(session_id=app.link.session_id)
        assert [r.model for r in rows] == ["claude-sonnet-4-6", "claude-opus-4-6"]
        assert rows[1].miss_reason == "model_changed"
        bar = app.query(CallBar).last().render().plain
        assert "✗ model_changed" in bar


async def test_bad_model_spec_and_unknown_command_are_reported(make_app):
    app = make_app({SPEC: []})
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/model gpt-4")
        await pilot.pause()
        assert "has no provider" in notices(app)[-1]
        await submit(pilot, "/model openai/gpt-5.4")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.busy and "could not switch" in notices(app)[-1], "the failed switch")
        assert app.link.model_label == SPEC
        await submit(pilot, "/frob")
        await pilot.pause()
        assert notices(app)[-1].startswith("unknown command /frob")
        assert not app.query(UserPrompt)  # nothing went to the model


async def test_cost_clear_and_resume(make_app, ledger):
    app = make_app({SPEC: [{"text": "First."}, {"text": "Second."}, {"text": "Third, after resuming."}]})
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "one", 1)
        await one_turn(pilot, "two", 2)
        first_session = app.link.session_id

        await pilot.press("f2")
        await pilot.pause()
        cost = markdown_blocks(app)[-1]
        assert "| 2 |" in cost and "`cold`" in cost

        await submit(pilot, "/clear")
        await wait_until(pilot, lambda: app.link.session_id != first_session, "a new session")
        assert not app.query(UserPrompt) and not app.query(CallBar) and app.figures.calls == []

        await submit(pilot, "/resume")
        await pilot.pause()
        listing = markdown_blocks(app)[-1]
        assert f"`{first_session}`" in listing and "| 2 |" in listing and "| one |" in listing
        # At 80 columns the same sessions are a list: six table columns would cut every one.
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await submit(pilot, "/resume")
        await pilot.pause()
        listing = markdown_blocks(app)[-1]
        assert "|" not in listing and f"- `{first_session}` " in listing and " · 2 calls · $" in listing
        assert listing.endswith(" · one")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()

        await submit(pilot, f"/resume {first_session}")
        await wait_until(pilot, lambda: len(app.query(CallBar)) == 2, "the resumed calls")
        assert [w.render().plain for w in app.query(UserPrompt)] == ["one", "two"]
        assert [m.source for m in app.query(".notice-md.-assistant")] == ["First.", "Second."]
        assert f"resumed session {first_session}" in notices(app)[-1]

        # The conversation goes on: the model sees the whole earlier transcript, and the cache
        # panel now counts the old calls with the new one.
        await one_turn(pilot, "three", 3)
        backend = app.link.router.backends[SPEC]
        assert len(backend.prompts[-1].messages) == 5
        assert app.query(AssistantText).last().source == "Third, after resuming."
        # A real resume: the same session goes on in the ledger (same id, so the same cache key).
        assert app.link.session_id == first_session
        rows = ledger.calls(session_id=first_session)
        assert len(rows) == 3 and rows[2].error is None and rows[2].miss_reason is None

        await submit(pilot, "/resume 0123")
        await pilot.pause()
        assert "no saved transcript" in notices(app)[-1]
        await submit(pilot, "/resume ../../etc/passwd")
        await pilot.pause()
        assert "not a session id" in notices(app)[-1]


async def test_input_history_walks_with_up_and_down(make_app):
    app = make_app({SPEC: [{"text": "a"}, {"text": "b"}]})
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "first prompt", 1)
        await one_turn(pilot, "second prompt", 2)
        box = app.query_one("#prompt")
        box.value = "draft"
        await pilot.press("up")
        assert box.value == "second prompt"
        await pilot.press("up")
        assert box.value == "first prompt"
        await pilot.press("down", "down")
        assert box.value == "draft"


async def test_approve_command_toggles_the_dialogs(make_app, workspace):
    app = make_app({SPEC: [{"tool_calls": [("shell", '{"command": "echo ok"}')]}, {"text": "done"}]}, approvals=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/approve off")
        await pilot.pause()
        assert "without asking" in notices(app)[-1]
        await one_turn(pilot, "run it", 2)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_resume_at_start_like_the_cli_flag(make_app):
    first = make_app({SPEC: [{"text": "Earlier answer."}]})
    async with first.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "earlier question", 1)
    old_id = first.link.session_id

    app = make_app({SPEC: []}, resume=old_id)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert [w.render().plain for w in app.query(UserPrompt)] == ["earlier question"]
        assert len(app.query(CallBar)) == 1 and app.figures.totals().calls == 1
        assert f"resumed session {old_id}" in notices(app)[-1]


async def test_a_step_limit_stops_the_turn_and_says_why(make_app):
    app = make_app({SPEC: [{"tool_calls": [("list_dir", "{}")]}, {"text": "never reached"}]}, max_steps=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "look around", 1)
        assert notices(app)[-1] == "stopped: reached the limit of 1 model calls"
        assert app.activity.what == "ready"
        # The open turn is closed with a note, so the next prompt can follow.
        assert app.link.session.transcript.messages[-1].content[0].text == (
            "[stopped by a limit: reached the limit of 1 model calls]"
        )


async def test_compact_summarizes_the_history_and_goes_on(make_app, ledger):
    script = [
        {"text": "First answer."},
        {"text": "Second answer."},
        {"text": "Summary: the user asked two things; both are answered."},
        {"text": "Third answer, after the summary."},
    ]
    app = make_app({SPEC: script})
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "first question " * 20, 1)
        await one_turn(pilot, "second question", 2)
        await submit(pilot, "/compact")
        await wait_until(pilot, lambda: not app.busy and any(n.startswith("compacted:") for n in notices(app)), "/compact")
        rows = ledger.calls()
        assert [r.kind for r in rows] == [None, None, "compaction"]
        assert app.link.session.transcript.messages[0].content[0].text.endswith("both are answered.")
        await one_turn(pilot, "third question", 4)
        assert ledger.calls()[-1].miss_reason == "compacted"


async def test_effort_switch_asks_every_later_call_and_starts_an_epoch(make_app):
    app = make_app({SPEC: [{"text": "One."}, {"text": "Two."}]})
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "hello", 1)
        await submit(pilot, "/effort")
        await pilot.pause()
        assert notices(app)[-1].startswith("effort: the model default")
        await submit(pilot, "/effort high")
        await pilot.pause()
        assert "effort default -> high from the next call: a new cache epoch" in notices(app)[-1]
        assert app.link.effort == "high" and app.link.session.route.backend.effort == "high"
        await one_turn(pilot, "again", 2)
        assert any("cache epoch 1: effort changed by the user: effort default -> high" in n for n in notices(app))
        await submit(pilot, "/effort ultra")
        await pilot.pause()
        assert "usage: /effort [low|medium|high|max|default]" in notices(app)[-1]
        await submit(pilot, "/effort default")
        await pilot.pause()
        assert app.link.effort is None


async def test_refresh_reads_the_project_docs_again_as_a_new_epoch(make_app, workspace):
    app = make_app({SPEC: [{"text": "One."}, {"text": "Two."}]})
    async with app.run_test(size=(120, 40)) as pilot:
        await one_turn(pilot, "hello", 1)
        await submit(pilot, "/refresh")
        await pilot.pause()
        assert notices(app)[-1] == "the project docs, system prompt and tools are as the session has them"
        (workspace / "AGENTS.md").write_text("Run `pytest -q` before you finish.\n")
        await submit(pilot, "/refresh")
        await pilot.pause()
        assert notices(app)[-1] == "refreshed the project docs (AGENTS.md): the next request starts a new cache epoch"
        await one_turn(pilot, "again", 2)
        assert any("refreshed by the user: the project docs (AGENTS.md)" in n for n in notices(app))
        assert "pytest -q" in app.link.session.inputs.docs[0].text
