"""Token columns of reports and what-if tables: writes in TTL order, none dropped from sight."""

from __future__ import annotations

from hitrate.evals.buckets import token_columns
from hitrate.store.cost import UsageTotals


def _labels(*totals: UsageTotals) -> list[str]:
    return [label for label, _ in token_columns(list(totals))]


def test_writes_show_in_ttl_order_including_openai_12h() -> None:
    anthropic = UsageTotals(calls=2, cache_write_5m=10, cache_write_1h=5)
    openai_56 = UsageTotals(calls=2, cache_write_30m=7, cache_write_12h=3)
    assert _labels(anthropic, openai_56) == ["read", "write 5m", "write 30m", "write 1h", "write 12h", "fresh", "output"]


def test_a_bucket_only_reported_as_unknown_still_gets_its_column() -> None:
    totals = UsageTotals(calls=1, unknown={"cache_write_1h": 1})
    assert "write 1h" in _labels(totals)


def test_no_writes_at_all_is_one_write_column() -> None:
    columns = token_columns([UsageTotals(calls=3, fresh_input=100, cache_read=50)])
    assert columns == [("read", "cache_read"), ("write", "cache_write_5m"), ("fresh", "fresh_input"), ("output", "output")]
