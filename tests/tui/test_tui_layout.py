"""The layout at 80×24 and wider: the cache panel's compact form and a status bar that keeps cost,
Σ-hit and the cache clock whatever the width."""

from __future__ import annotations

from datetime import timedelta

from tui_helpers import SPEC, T0
from tui_session_script import THREE_TURNS, run_three_turns

from hitrate.store.cost import UsageTotals
from hitrate.tui.activity import Activity
from hitrate.tui.cache_panel import CachePanel, CallBar
from hitrate.tui.figures import fmt_usd
from hitrate.tui.status import StatusLine, fit_segments, status_segments
from hitrate.tui.ttl import CacheClock


def _clock() -> CacheClock:
    return CacheClock(state="warm", seconds_left=200, rule_label="5m")


def test_status_fit_keeps_activity_cost_hit_and_clock_from_80_columns() -> None:
    totals = UsageTotals(calls=7, cache_read=10_600, fresh_input=0, output=280, cost_usd=0.015)
    activity = Activity(what="waiting for anthropic", short="waiting", since=T0, step=3, prompt_tokens=12_000)
    segments = status_segments("anthropic/claude-sonnet-4-6", activity, totals, _clock(), now=T0 + timedelta(seconds=4))
    wide = fit_segments(segments, 200)
    assert wide.startswith("anthropic/claude-sonnet-4-6 │ step 3 · waiting for anthropic · 4s · ~12.0k in")
    assert "7 calls" in wide and "R 10.6k" in wide
    for width in (100, 80, 78):
        line = fit_segments(segments, width)
        assert "$0.015" in line and "Σhit" in line and "cache warm 3:20" in line, (width, line)
        assert "waiting for anthropic · 4s" in line and len(line) <= width, (width, line)
    # The model name, the call count and the buckets go before the activity loses a detail.
    at_78 = fit_segments(segments, 78)
    assert "anthropic/" not in at_78 and "calls" not in at_78 and "R 10.6k" not in at_78
    assert at_78.startswith("step 3 · waiting for anthropic · 4s")


async def test_80x24_compact_cache_panel_and_status(make_app):
    app = make_app({SPEC: list(THREE_TURNS)})
    async with app.run_test(size=(80, 24)) as pilot:
        await run_three_turns(pilot)
        await pilot.pause()
        assert app.screen.has_class("-narrow")
        panel = app.query_one(CachePanel)
        assert panel.outer_size.width == 26  # not 42 of 80 columns
        bars = list(app.query(CallBar))
        assert len(bars) == 7 and all(bar.size.height == 1 for bar in bars)
        first = bars[0].render().plain
        # The first call missed (cold): one line with its bar, a ✗, and its cost.
        assert first.startswith("#1 ") and "✗" in first and "\n" not in first
        assert first.endswith(fmt_usd(bars[0].figure.cost_usd)) and len(first) == bars[0].size.width
        assert "✗" not in bars[1].render().plain
        summary = str(app.query_one("#cache-summary").render())
        assert "Σhit" in summary and "cost $" in summary and "misses 1" in summary
        status = app.query_one(StatusLine)
        shown = status.text
        assert len(shown) <= status.content_size.width
        assert "Σhit" in shown and "$0.0" in shown and "cache warm" in shown

        # Widening the terminal brings the full panel and the whole status line back.
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        await pilot.pause()
        assert not app.screen.has_class("-narrow")
        assert app.query_one(CachePanel).outer_size.width == 42
        assert all(bar.size.height >= 2 for bar in app.query(CallBar))
        assert status.text == status.full_text and "7 calls" in status.text
        assert "anthropic" in str(app.query_one("#cache-summary").render())
