"""Which token columns a table of usage totals shows, in one order for every report and what-if."""

from __future__ import annotations

from hitrate.store.cost import UsageTotals
from hitrate.store.usage import WRITE_BUCKETS


def token_columns(totals: list[UsageTotals]) -> list[tuple[str, str]]:
    """(label, bucket) of the token columns: read, the cache-write TTLs any of `totals` used, fresh,
    output.

    Writes come in TTL order (5m, 30m, 1h, 12h). Each provider uses one or two of the four, so a
    table shows the ones that happened (a known count or an unknown one), or a single "write"
    column when none did, rather than four mostly-zero columns or a fixed subset that would drop
    another provider's TTL from sight."""
    used = [b for b in WRITE_BUCKETS if any(getattr(t, b) or t.unknown.get(b, 0) for t in totals)]
    writes = [(f"write {b.rsplit('_', 1)[1]}", b) for b in used] or [("write", WRITE_BUCKETS[0])]
    return [("read", "cache_read"), *writes, ("fresh", "fresh_input"), ("output", "output")]
