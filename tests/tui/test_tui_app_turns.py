"""The app driven by Pilot with the real harness agent and a scripted model: full turns, tool
panels, status figures, cancellation, approvals."""

from __future__ import annotations

import json
import threading

from tui_helpers import SPEC, submit, wait_until

from hitrate.tui.cache_panel import CallBar
from hitrate.tui.conversation import AssistantText, UserPrompt
from hitrate.tui.status import StatusLine
from hitrate.tui.tool_panel import ToolPanel

FIX = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}


def status(app) -> str:
    return app.query_one(StatusLine).full_text


async def test_full_turn_streams_runs_tools_and_updates_figures(make_app, workspace, ledger):
    app = make_app({SPEC: [
        {"text": "Let me read **calc.py** first.", "tool_calls": [("read_file", '{"path": "calc.py"}')]},
        {"tool_calls": [("edit_file", json.dumps(FIX))]},
        {"text": "Fixed: `add` now adds."},
    ]})
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "Fix add in calc.py")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn to end")

        assert [w.render().plain for w in app.query(UserPrompt)] == ["Fix add in calc.py"]
        texts = [w.source for w in app.query(AssistantText)]
        assert texts == ["Let me read **calc.py** first.", "Fixed: `add` now adds."]
        panels = list(app.query(ToolPanel))
        assert [(p.tool_name, p.state) for p in panels] == [("read_file", "done"), ("edit_file", "done")]
        assert panels[0].title == "✓ read_file: calc.py"
        # The edit's diff is shown in its panel, which stays open.
        assert not panels[1].collapsed
        assert "+    return a + b" in panels[1].diff and panels[1].query(".tool-diff")
        assert (workspace / "calc.py").read_text().endswith("return a + b\n")

        # Figures: three calls, from the same ledger rows the harness wrote.
        rows = ledger.calls(session_id=app.link.session_id)
        assert len(rows) == 3 and len(app.query(CallBar)) == 3
        totals = app.figures.totals()
        assert totals.calls == 3
        assert totals.cache_read == sum(r.usage.cache_read for r in rows) > 0
        assert totals.cache_write_5m == sum(r.usage.cache_write_5m for r in rows) > 0
        assert totals.cost_usd is not None
        assert abs(totals.cost_usd - sum(r.cost_usd for r in rows)) < 1e-12
        ratio = totals.cache_read / sum(r.usage.prompt_tokens for r in rows)
        line = status(app)
        assert f"Σhit {ratio * 100:.1f}%" in line and "3 calls" in line and "ready" in line
        assert "cache warm 5:00 (5m)" in line  # the frozen clock has not moved since the last call
        # The first call missed (cold): its bar says so with what it cost.
        first = app.query(CallBar).first()
        assert rows[0].miss_reason == "cold"
        assert "✗ cold" in first.render().plain and "+$" in first.render().plain


async def test_ttl_countdown_moves_with_the_clock(make_app, clock):
    app = make_app({SPEC: [{"text": "Hello."}]})
    async with app.run_test(size=(120, 40)) as pilot:
        assert "cache unknown · nothing cached yet" in status(app)
        await submit(pilot, "hi")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn to end")
        clock.advance(250)
        app.refresh_figures()
        assert "cache expiring 0:50 (5m)" in status(app)
        clock.advance(60)
        app.refresh_figures()
        assert "cache cold · idle 5m10s (5m)" in status(app)


async def test_escape_cancels_the_step_and_keeps_what_was_recorded(make_app, ledger):
    gate = threading.Event()
    app = make_app({SPEC: [
        {"text": "First answer."},
        {"text": "A long answer that the user stops half way.", "gate": gate},
        {"text": "Back again."},
    ]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "one")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 1, "the first turn")
        await submit(pilot, "two")
        await wait_until(pilot, backend.waiting.is_set, "the second call to start streaming")
        await pilot.press("escape")
        # The step ends at once, while the model call is still held open (no text comes after Esc).
        await wait_until(pilot, lambda: not app.busy, "the cancelled turn to end")
        assert not backend.prompts[1:]  # the held call never finished
        gate.set()

        rows = ledger.calls(session_id=app.link.session_id)
        assert [r.error is None for r in rows] == [True, False]
        assert rows[1].error.startswith("cancelled")
        notices = " ".join(str(n.render()) for n in app.query("NoticeLine"))
        assert "step cancelled" in notices
        # The partial answer stays on screen; the session goes on from where it stopped.
        assert app.query(AssistantText).last().source.startswith("A long answe")
        await submit(pilot, "three")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 3, "the third turn")
        assert app.query(AssistantText).last().source == "Back again."
        # The model saw the interrupted turn closed by a note, then the new prompt.
        texts = [b.text for m in backend.prompts[-1].messages for b in m.content if hasattr(b, "text") and b.type == "text"]
        assert texts[-2:] == ["[interrupted by the user]", "three"]
        assert app.figures.failed_calls == 1 and app.figures.totals().calls == 2


async def test_a_repair_turn_and_the_reason_the_turn_ended_are_shown(make_app, workspace, ledger):
    from hitrate.tui.conversation import NoticeLine

    app = make_app({SPEC: [
        {"text": '{"name": "deep_merge", "arguments": {"a": {}}}'},
        {"text": "deep_merge({}, {})"},
    ]})
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "Write deep_merge")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the turn to end")
        notices = [w.render().plain for w in app.query(NoticeLine)]
        assert any(n.startswith("repair: a call of `deep_merge`, which is not one of your tools. The model was told: ")
                   for n in notices)
        assert any(n.startswith("ended: the repair turn did not produce a call") for n in notices)
