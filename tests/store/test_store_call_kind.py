"""The `kind` of a call row: NULL for an agent call, "keepalive" for a warm-up; stored, read back,
counted in every total, and groupable so reports can show warm-ups apart."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hitrate.store.ledger import Ledger
from hitrate.store.normalize import from_anthropic
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=timezone.utc)


def call(seconds: float, raw: dict[str, int], kind: str | None = None) -> CallRecord:
    return CallRecord(backend="anthropic", model="claude-sonnet-4-6", session_id="s1", started_at=T0 + timedelta(seconds=seconds),
                      usage=from_anthropic(raw), raw_usage=raw, kind=kind)


def test_warm_ups_are_stored_tagged_and_summed_apart(tmp_path: Path) -> None:
    wrote = {"input_tokens": 10, "cache_creation_input_tokens": 50_000, "cache_read_input_tokens": 0, "output_tokens": 300}
    read = {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 50_000, "output_tokens": 0}
    with Ledger(tmp_path / "ledger.db") as ledger:
        table = PriceTable.default()
        ledger.record_call(call(0, wrote), price_table=table)
        ledger.record_call(call(270, read, kind="keepalive"), price_table=table)
        ledger.record_call(call(540, read, kind="keepalive"), price_table=table)
        assert [c.kind for c in ledger.calls(session_id="s1")] == [None, "keepalive", "keepalive"]
        groups = {g.key: g.totals for g in ledger.summarize("kind")}
        assert groups[None].calls == 1 and groups["keepalive"].calls == 2
        assert groups["keepalive"].cost_usd == pytest.approx(2 * (50_000 * 0.30 + 10 * 3.0) / 1e6)
        whole = ledger.totals(session_id="s1")
        assert whole.calls == 3 and whole.cost_usd == pytest.approx(groups[None].cost_usd + groups["keepalive"].cost_usd)
