"""The eval progress bar's running totals: priced, unpriced and failed calls told apart."""

from __future__ import annotations

from datetime import datetime, timezone

from hitrate.evals.progress import RunningTotals
from hitrate.harness.events import CallRecorded
from hitrate.store.usage import Usage


def _call(cost: float | None, *, error: str | None = None, read: int | None = 900, fresh: int | None = 100) -> CallRecorded:
    usage = Usage() if error else Usage(fresh_input=fresh, cache_read=read, cache_write_5m=0, cache_write_30m=0,
                                                cache_write_1h=0, cache_write_12h=0, output=10)
    return CallRecorded(session_id="s", step=1, call_id="c", model="m", started_at=datetime.now(timezone.utc), usage=usage,
                        cost_usd=cost, miss_reason=None, miss_tokens=None, miss_cost_usd=None, ttft_s=None,
                        latency_s=None, stop_reason=None if error else "end_turn", error=error, epoch=0)


def test_failed_calls_are_not_counted_as_unpriced():
    totals = RunningTotals()
    totals.add_call(_call(None, error="cancelled"))
    assert totals.cost_text() == "$0.00" and totals.hit_text() == "hit –"
    totals.add_call(_call(0.01))
    totals.add_call(_call(None))
    assert totals.cost_text() == "$0.0100 (+1 unpriced)"
    assert totals.hit_text() == "hit 90%"


def test_a_resumed_run_shows_what_was_done_before():
    totals = RunningTotals()
    totals.finished_earlier = 3
    totals.add_outcome("pass")
    assert totals.outcome_text().startswith("[dim]3 done before[/dim]")
