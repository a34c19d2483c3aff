"""Eight writer processes, one ledger file: every row arrives exactly once."""

from __future__ import annotations

import multiprocessing
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hitrate.store.ledger import Ledger
from hitrate.store.ledger_schema import SCHEMA_VERSION

WRITERS = 8
ROWS = 1000


def write_rows(path: str, writer: int, start: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    from hitrate.store.records import CallRecord
    from hitrate.store.usage import Usage

    start.wait()
    # Every writer opens the fresh file itself, so they also race to create and migrate it.
    with Ledger(path) as ledger:
        for seq in range(ROWS):
            ledger.record_call(
                CallRecord(
                    session_id=f"writer-{writer}",
                    backend="test",
                    model="m",
                    started_at=datetime.now(timezone.utc),
                    usage=Usage(fresh_input=seq, cache_write_5m=0, cache_write_30m=0, cache_write_1h=0, cache_write_12h=0, cache_read=writer, output=1),
                    miss_tokens=seq,
                )
            )


@pytest.mark.slow
def test_eight_processes_write_one_file_without_loss_or_duplicates(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers = [ctx.Process(target=write_rows, args=(path, w, start)) for w in range(WRITERS)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=300)
    assert [w.exitcode for w in workers] == [0] * WRITERS

    with Ledger(path) as ledger, ledger.connection() as conn:
        assert ledger.count_calls() == WRITERS * ROWS
        assert conn.execute("SELECT COUNT(DISTINCT id) FROM calls").fetchone()[0] == WRITERS * ROWS
        per_writer = conn.execute(
            "SELECT session_id, COUNT(*), COUNT(DISTINCT miss_tokens), MIN(miss_tokens), MAX(miss_tokens) FROM calls GROUP BY session_id ORDER BY session_id"
        ).fetchall()
        assert per_writer == [(f"writer-{w}", ROWS, ROWS, 0, ROWS - 1) for w in range(WRITERS)]
        assert ledger.schema_version == SCHEMA_VERSION
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
