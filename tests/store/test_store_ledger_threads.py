"""One Ledger shared by several threads of a process (a UI thread and agent worker threads)."""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hitrate.store.ledger import Ledger
from hitrate.store.records import CallRecord, MessageRecord
from hitrate.store.usage import Usage

THREADS = 6
ROWS = 150


def call(session: str, seq: int) -> CallRecord:
    return CallRecord(session_id=session, backend="test", model="m", started_at=datetime.now(timezone.utc),
                      usage=Usage(fresh_input=seq, output=1), miss_tokens=seq)


def test_threads_write_and_read_one_ledger_without_loss(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS + 1)
    with Ledger(tmp_path / "shared.db") as ledger:  # opened here, used only by the other threads

        def work(n: int) -> None:
            try:
                start.wait()
                session = ledger.start_session(label=f"thread {n}", session_id=f"s{n}")
                for seq in range(ROWS):
                    ledger.record_call(call(session.id, seq))
                    ledger.append_message(MessageRecord(session_id=session.id, seq=seq, kind="user", body=f'{{"n": {seq}}}'))
                    if seq % 25 == 0:  # reads interleaved with the other threads' writes
                        assert len(ledger.calls(session_id=session.id)) == seq + 1
                        ledger.totals()
                with ledger.transaction():  # a batch of writes in one transaction
                    for seq in range(ROWS, ROWS + 10):
                        ledger.record_call(call(session.id, seq))
            except BaseException as exc:  # reported below, with the thread's traceback
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        start.wait()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors[0]
        assert ledger.count_calls() == THREADS * (ROWS + 10)
        for n in range(THREADS):
            rows = ledger.calls(session_id=f"s{n}")
            assert [r.miss_tokens for r in rows] == list(range(ROWS + 10))
            assert [m.seq for m in ledger.messages(f"s{n}")] == list(range(ROWS))


def test_a_thread_cannot_join_another_threads_transaction(tmp_path: Path) -> None:
    # Thread A holds a transaction open and then rolls it back; thread B writes meanwhile. B's row
    # must wait for A and survive A's rollback, instead of joining A's transaction and vanishing.
    with Ledger(tmp_path / "l.db") as ledger:
        inside = threading.Event()
        release = threading.Event()
        b_done = threading.Event()

        def a() -> None:
            with pytest.raises(RuntimeError):
                with ledger.transaction():
                    ledger.record_call(call("a", 0))
                    inside.set()
                    release.wait(10)
                    raise RuntimeError("roll back")

        def b() -> None:
            inside.wait(10)
            ledger.record_call(call("b", 0))
            b_done.set()

        ta, tb = threading.Thread(target=a), threading.Thread(target=b)
        ta.start()
        tb.start()
        inside.wait(10)
        assert not b_done.wait(0.3), "thread B wrote inside thread A's open transaction"
        release.set()
        ta.join(10)
        tb.join(10)
        assert b_done.is_set()
        assert [c.session_id for c in ledger.calls()] == ["b"]


def test_transcript_entries_are_append_only_and_read_back_in_order(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.db") as ledger:
        ledger.start_session(session_id="s", workspace="/w", model_spec="anthropic/claude-sonnet-4-6")
        ledger.start_session(session_id="empty")
        bodies = ['{"role":"user","content":[{"type":"text","text":"héllo"}]}', '{"x": [1, 2]}', '{"spec": "m"}']
        for seq, (kind, body) in enumerate(zip(["user", "context", "model"], bodies)):
            ledger.append_message(MessageRecord(session_id="s", seq=seq, kind=kind, body=body))
        back = ledger.messages("s")
        assert [(m.seq, m.kind, m.body) for m in back] == [(0, "user", bodies[0]), (1, "context", bodies[1]), (2, "model", bodies[2])]
        assert [m.seq for m in ledger.messages("s", kind="context")] == [1]
        assert [m.seq for m in ledger.messages("s", limit=2)] == [0, 1]
        assert [s.id for s in ledger.sessions(with_messages=True)] == ["s"]
        assert ledger.get_session("s").model_spec == "anthropic/claude-sonnet-4-6" and ledger.get_session("s").workspace == "/w"
        # A second entry at a position already stored is refused, the first one kept.
        with pytest.raises(sqlite3.IntegrityError, match="already has a message 1"):
            ledger.append_message(MessageRecord(session_id="s", seq=1, kind="user", body="{}"))
        with pytest.raises(ValueError, match="not JSON"):
            ledger.append_message(MessageRecord(session_id="s", seq=3, kind="user", body="{oops"))
        assert ledger.messages("s")[1].body == bodies[1] and len(ledger.messages("s")) == 3


def test_the_raw_connection_is_held_like_a_transaction(tmp_path: Path) -> None:
    # SQL the ledger has no method for runs on its connection under its lock: another thread's
    # write waits until the block ends, and a transaction opened inside the block works.
    with Ledger(tmp_path / "l.db") as ledger:
        inside = threading.Event()
        release = threading.Event()
        b_done = threading.Event()

        def a() -> None:
            with ledger.connection() as conn:
                inside.set()
                release.wait(10)
                with ledger.transaction():
                    conn.execute("INSERT INTO sessions (id, started_at) VALUES ('raw', '2026-01-01T00:00:00+00:00')")

        def b() -> None:
            inside.wait(10)
            ledger.record_call(call("b", 0))
            b_done.set()

        ta, tb = threading.Thread(target=a), threading.Thread(target=b)
        ta.start()
        tb.start()
        inside.wait(10)
        assert not b_done.wait(0.3), "thread B used the connection while thread A held it"
        release.set()
        ta.join(10)
        tb.join(10)
        assert b_done.is_set()
        assert ledger.get_session("raw").id == "raw" and [c.session_id for c in ledger.calls()] == ["b"]
