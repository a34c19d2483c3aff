"""The activity (what the agent does, for how long, tokens streamed so far) is the last thing the
status bar gives up, at every width from 80 columns: a user can always tell a working agent from a
stuck one, whatever else the bar has to leave out."""

from __future__ import annotations

import threading
from datetime import timedelta

from tui_helpers import SPEC, T0, submit, wait_until

from hitrate.store.cost import UsageTotals
from hitrate.store.usage import Usage
from hitrate.tui.activity import Activity, format_elapsed, host_of
from hitrate.tui.cache_panel import CallBar
from hitrate.tui.figures import CallFigure
from hitrate.tui.messages import CallStarting
from hitrate.tui.status import StatusLine, fit_segments, status_segments
from hitrate.tui.ttl import CacheClock

COMPAT = "openai-compat/qwen2.5-coder-1.5b@http://127.0.0.1:8000/v1"
LRU = CacheClock(state="unknown", reason="LRU prefix cache: kept until memory runs short, no TTL")
WARM = CacheClock(state="warm", seconds_left=200, rule_label="5m")
TOTALS = UsageTotals(calls=7, cache_read=10_600, fresh_input=0, output=280, cost_usd=0.015)

ACTIVITIES = {
    "waiting": (Activity(what="waiting for 127.0.0.1:8000", short="waiting", since=T0, step=3, prompt_tokens=12_300),
                ("waiting", "35s")),
    "writing": (Activity(what="writing", since=T0, step=3, streamed_chars=1_360), ("writing", "35s", "~340 tok")),
    "approval": (Activity(what="awaiting approval: shell: pytest -q tests/test_calc.py", short="approval?", since=T0),
                 ("approval", "35s")),
    "compacting": (Activity(what="compacting", since=T0), ("compacting", "35s")),
}


def test_activity_forms_say_what_for_how_long_and_tokens() -> None:
    now = T0 + timedelta(seconds=35)
    waiting, _ = ACTIVITIES["waiting"]
    assert [text for text, _ in waiting.forms(now)] == [
        "step 3 · waiting for 127.0.0.1:8000 · 35s · ~12.3k in", "step 3 · waiting for 127.0.0.1:8000 · 35s",
        "waiting for 127.0.0.1:8000 · 35s", "waiting · 35s",
    ]
    writing, _ = ACTIVITIES["writing"]
    assert writing.forms(now)[0][0] == "step 3 · writing · 35s · ~340 tok"
    assert Activity(what="ready").forms(now) == [("ready", False)]
    assert format_elapsed(65) == "1m05s" and format_elapsed(3720) == "1h02m"
    assert host_of(COMPAT) == "127.0.0.1:8000" and host_of("anthropic/claude-sonnet-4-6") == "anthropic"


def test_the_activity_is_the_last_thing_the_status_bar_drops_at_every_width() -> None:
    now = T0 + timedelta(seconds=35)
    for name, (activity, core) in ACTIVITIES.items():
        for clock in (LRU, WARM):
            segments = status_segments(COMPAT, activity, TOTALS, clock, now=now)
            full = fit_segments(segments, None)
            for width in range(80, len(full) + 2):
                line = fit_segments(segments, width)
                assert len(line) <= width, (name, width, line)
                shown = line.split(" │ ")
                # The activity is never cut or dropped from 80 columns up: it keeps what it is,
                # how long it has been going and the tokens streamed.
                activity_text = shown[1] if shown[0] == COMPAT else shown[0]
                assert activity_text in [text for text, _ in activity.forms(now)], (name, width, line)
                assert all(word in activity_text for word in core), (name, width, line)
                if activity_text != activity.forms(now)[0][0]:
                    # Its details went only after the model, the call count and the buckets.
                    assert shown[0] != COMPAT and "calls" not in line and "R 10.6k" not in line, (name, width, line)
            at_80 = fit_segments(segments, 80)
            # Cost stays at 80 columns next to the whole activity; the model (in the panel) goes first.
            assert "$0.015" in at_80 and COMPAT not in at_80, (name, at_80)


def test_a_bar_too_narrow_for_the_activity_cuts_it_last() -> None:
    activity, _ = ACTIVITIES["approval"]
    segments = status_segments(COMPAT, activity, TOTALS, WARM, now=T0 + timedelta(seconds=5))
    assert fit_segments(segments, 14) == "approval? · 5s"
    assert fit_segments(segments, 10) == "approval?…"


async def test_status_bar_at_80x24_shows_waiting_then_streaming(make_app, clock):
    """From the moment a call is sent: who it waits for and for how long; then the tokens streamed
    and the time since the request went out, ticking with the app's clock."""
    gate = threading.Event()
    reply = "I will read calc.py first, then run the failing test to see what it prints. " * 4
    app = make_app({COMPAT: [{"text": reply, "gate": gate}]}, spec=COMPAT)
    async with app.run_test(size=(80, 24)) as pilot:
        status = app.query_one(StatusLine)
        app.post_message(CallStarting(1, COMPAT, 3_100))
        await pilot.pause()
        clock.advance(12)
        app.refresh_figures()
        await pilot.pause()
        assert status.text.startswith("step 1 · waiting for 127.0.0.1:8000 · 12s │"), status.text
        assert "no price" in status.text and len(status.text) <= 80
        assert status.full_text.startswith(f"{COMPAT} │ step 1 · waiting for 127.0.0.1:8000 · 12s · ~3.1k in │")

        await submit(pilot, "why does test_add fail?")
        backend = next(iter(app.link.router.backends.values()))
        await wait_until(pilot, lambda: backend.waiting.is_set() and app.activity.what == "writing", "the first tokens")
        clock.advance(9)
        app.refresh_figures()
        await pilot.pause()
        streamed = app.activity.streamed_tokens
        assert streamed > 0
        assert status.text.startswith(f"step 1 · writing · 9s · ~{streamed} tok │"), status.text
        gate.set()
        await wait_until(pilot, lambda: not app.busy, "the turn")
        assert status.text.startswith("ready")


async def test_a_compaction_row_keeps_its_output_count_at_120_columns(make_app):
    """The wide panel's second line: the kind of call and its four counts; when they do not fit
    on one line the kind goes on its own line, and no count is cut."""
    app = make_app({SPEC: []})
    async with app.run_test(size=(120, 40)) as pilot:
        usage = Usage(cache_read=123_456, cache_write_5m=12_345, cache_write_30m=0, cache_write_1h=0, cache_write_12h=0,
                      fresh_input=12_345, output=1_234)
        figure = CallFigure(number=5, backend="anthropic", model="claude-sonnet-4-6", started_at=T0, usage=usage,
                            cost_usd=0.05, kind="compaction")
        await app.cache_panel.add_call(figure)
        await pilot.pause()
        bar = app.query_one(CallBar)
        lines = bar.render().plain.splitlines()
        assert lines[1].strip() == "compaction" and lines[2].strip() == "R 123k  W 12.3k  F 12.3k  O 1.2k", lines
        assert all(len(line) <= bar.size.width for line in lines) and bar.size.height == 3
