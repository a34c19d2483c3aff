"""Attempts, pending rows and the spool journal: the ledger keeps every attempted call, a call cut
short by a dying process, and a call a full disk could not take."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlite_utils import Database

from hitrate.store.ledger import Ledger, LedgerWriteError
from hitrate.store.ledger_schema import SCHEMA_VERSION, migrate
from hitrate.store.ledger_spool import spool_path
from hitrate.store.normalize import from_anthropic
from hitrate.store.prices import PriceTable
from hitrate.store.records import INTERRUPTED_CALL_ERROR, CallRecord, MessageRecord
from hitrate.store.usage import Usage

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=timezone.utc)
RAW = {"input_tokens": 21, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 188086, "output_tokens": 393}


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "ledger.db") as db:
        yield db


def call(**kw: object) -> CallRecord:
    return CallRecord(**{"backend": "anthropic", "model": "claude-opus-5", "started_at": T0, **kw})


def served(pending: CallRecord) -> CallRecord:
    return pending.model_copy(update={"usage": from_anthropic(RAW), "raw_usage": RAW, "error": None, "latency_s": 1.5})


def full(ledger: Ledger) -> None:
    """No more pages for this connection: SQLite answers writes with "database or disk is full"."""
    with ledger.connection() as conn:
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")


def test_opening_a_version_6_file_adds_attempts_and_states(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    conn = sqlite3.connect(str(path), isolation_level=None)
    migrate(Database(conn), target=6)
    conn.execute("INSERT INTO calls (id, backend, model, started_at, output, error) VALUES ('a', 'anthropic', 'claude-opus-5', ?, 5, NULL)",
                 (T0.isoformat(),))
    conn.execute("INSERT INTO calls (id, backend, model, started_at, error) VALUES ('b', 'anthropic', 'claude-opus-5', ?, 'boom')",
                 (T0.isoformat(),))
    conn.close()
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION == 8
        a, b = ledger.calls()
        assert (a.attempt, a.retry_of, a.state) == (1, None, "done") and not a.interrupted
        assert b.error == "boom" and b.state == "done"
        totals = ledger.totals()
        assert totals.calls == 2 and totals.failed_calls == 1 and totals.retries == 0 and totals.interrupted_calls == 0
        assert ("retry_of",) in {tuple(i.columns) for i in ledger.db["calls"].indexes}


def test_a_pending_row_reads_as_interrupted_until_it_is_finished(ledger: Ledger) -> None:
    table = PriceTable.default()
    pending = ledger.begin_call(call(), price_table=table)
    (row,) = ledger.calls()
    assert row.state == "pending" and row.error == INTERRUPTED_CALL_ERROR and row.usage == Usage()
    assert ledger.totals().interrupted_calls == 1
    done = ledger.finish_call(served(pending), price_table=table)
    (row,) = ledger.calls()
    assert row.state == "done" and row.error is None and row.usage.cache_read == 188086
    assert row.cost_usd == done.cost_usd and row.cost_usd > 0 and row.price_snapshot_id == table.id
    assert ledger.totals().interrupted_calls == 0


def test_a_finished_row_is_never_overwritten(ledger: Ledger) -> None:
    pending = ledger.begin_call(call())
    ledger.finish_call(served(pending))
    with pytest.raises(sqlite3.IntegrityError, match="already complete"):
        ledger.finish_call(pending.model_copy(update={"error": "late"}))
    assert ledger.calls()[0].error is None


def test_retries_name_their_first_attempt(ledger: Ledger) -> None:
    first = ledger.begin_call(call())
    ledger.finish_call(first.model_copy(update={"error": "overloaded"}))
    second = ledger.begin_call(call(attempt=2, retry_of=first.id))
    ledger.finish_call(served(second))
    a, b = ledger.calls()
    assert b.retry_of == a.id and b.attempt == 2
    totals = ledger.totals()
    assert totals.calls == 2 and totals.retries == 1 and totals.failed_calls == 1 and totals.cache_read == 188086


def test_full_disk_spools_a_finished_call_and_the_next_open_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = Ledger(path)
    pending = ledger.begin_call(call(sections=None))
    full(ledger)
    big = served(pending).model_copy(update={"raw_usage": {**RAW, "note": "x" * 8000}})
    with pytest.raises(LedgerWriteError, match="database or disk is full") as caught:
        ledger.finish_call(big)
    assert caught.value.spooled_to == spool_path(path) and str(spool_path(path)) in str(caught.value)
    message = MessageRecord(session_id="s", seq=0, kind="user", body='{"x": "' + "y" * 8000 + '"}')
    with pytest.raises(LedgerWriteError):
        ledger.append_message(message)
    assert ledger.calls()[0].interrupted  # the file itself still has the pending row
    ledger.close()
    assert oct(spool_path(path).stat().st_mode & 0o777) == "0o600"
    with Ledger(path) as reopened:
        (row,) = reopened.calls()
        assert row.state == "done" and row.usage.cache_read == 188086 and row.raw_usage["note"] == "x" * 8000
        assert [m.seq for m in reopened.messages("s")] == [0]
        assert reopened.spooled_rows == 0 and not spool_path(path).exists()


def test_a_spool_line_cut_short_by_a_crash_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger(path) as ledger:
        full(ledger)
        with pytest.raises(LedgerWriteError):
            ledger.record_call(call(raw_usage={"note": "x" * 8000}))
    spooled = spool_path(path).read_text()
    # A last line cut short (the process died while writing it) is skipped, never misread.
    spool_path(path).write_text(spooled + '{"op": "call", "row": {"id"')
    with Ledger(path) as ledger:
        assert ledger.spooled_rows == 0 and len(ledger.calls()) == 1


def test_a_full_disk_before_a_call_sends_nothing_and_spools_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger(path) as ledger:
        full(ledger)
        with pytest.raises(LedgerWriteError, match="nothing was spent") as caught:
            ledger.begin_call(call(raw_usage={"note": "x" * 8000}, section_hashes=["h" * 64] * 200))
        assert caught.value.spooled_to is None and not spool_path(path).exists()


def test_when_even_the_spool_cannot_be_written_the_error_carries_the_row_and_its_usage(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    spool_path(path).mkdir()  # nothing can be appended there
    with Ledger(path) as ledger:
        pending = ledger.begin_call(call())
        full(ledger)
        with pytest.raises(LedgerWriteError) as caught:
            ledger.finish_call(served(pending).model_copy(update={"raw_usage": {**RAW, "note": "x" * 8000}}))
    assert caught.value.spooled_to is None
    message = str(caught.value)
    assert "could not be saved" in message and '"cache_read":188086' in message and '"output":393' in message
