"""The context gauge beside the cache panel: used against the window and the compaction threshold,
in both panel widths, and each compaction labelled in the call list (Pilot, 80×24 and wide)."""

from __future__ import annotations

from datetime import datetime, timezone

from hitrate.store.usage import Usage
from conftest import SPEC
from hitrate.tui.cache_panel import CallBar
from hitrate.tui.context_gauge import ContextGauge, context_used, gauge_line
from hitrate.tui.figures import CallFigure

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def _call(n: int, prompt: int, kind: str | None = None, error: str | None = None) -> CallFigure:
    usage = Usage(fresh_input=prompt // 4, cache_read=prompt - prompt // 4, cache_write_5m=0, cache_write_30m=0,
                  cache_write_1h=0, cache_write_12h=0, output=100)
    return CallFigure(number=n, backend="anthropic", model="m", started_at=T0, usage=usage, kind=kind, error=error)


def test_the_used_context_is_the_last_call_that_returned() -> None:
    calls = [_call(1, 10_000), _call(2, 24_000), _call(3, 26_000, kind="keepalive"), _call(4, 0, error="boom")]
    assert context_used(calls) == 24_100
    assert context_used([]) is None


def test_the_gauge_words_fit_both_widths() -> None:
    wide = gauge_line(123_400, 1_000_000, 0.8, compact=False)
    assert wide == "context 123k/1.00M · 12% · compacts 80%" and len(wide) <= 40
    assert gauge_line(24_000, 30_000, 0.8, compact=True) == "ctx 80% of 30.0k"
    assert "unknown" in gauge_line(5, None, 0.8, compact=False)


async def _shown(make_app, size: tuple[int, int]):
    app = make_app({SPEC: []})
    async with app.run_test(size=size) as pilot:
        app.link.session.config = app.link.session.config.model_copy(update={"context_window": 30_000})
        await app.cache_panel.add_call(_call(1, 20_000))
        await app.cache_panel.add_call(_call(2, 21_000, kind="compaction"))
        app.figures.add(_call(1, 20_000))
        app.refresh_figures()
        await pilot.pause()
        gauge = app.query_one(ContextGauge)
        bars = list(app.query(CallBar))
        return str(gauge.render()), [str(b.render()) for b in bars], gauge.region.width


async def test_the_gauge_at_80x24_and_wide(make_app) -> None:
    narrow, _, width = await _shown(make_app, (80, 24))
    assert narrow == "ctx 67% of 30.0k" and width > 0
    wide, bars, _ = await _shown(make_app, (160, 45))
    assert wide.splitlines()[-1] == "context 20.1k/30.0k · 67% · compacts 80%"
    assert "│" in wide.splitlines()[0]  # the threshold tick on the bar
    assert "compaction" in bars[1] and "compaction" not in bars[0]
    # Kind and counts did not fit one line of the panel: the kind has its own, no count is cut.
    assert bars[1].splitlines()[1:] == ["   compaction", "   R 15.8k  W 0  F 5.2k  O 100"]
