"""`ledger-merge` carries the sessions' stored transcripts: united by (session, position), a
different entry at a taken position is a conflict, merging again adds nothing."""

from __future__ import annotations

from pathlib import Path

from hitrate.evals.merge import merge_ledgers
from hitrate.store.ledger import Ledger
from hitrate.store.records import MessageRecord


def shard(path: Path, session: str, bodies: list[str]) -> Path:
    with Ledger(path) as ledger:
        ledger.start_session(session_id=session)
        for seq, body in enumerate(bodies):
            ledger.append_message(MessageRecord(session_id=session, seq=seq, kind="user", body=body))
    return path


def test_transcripts_are_merged_once_and_conflicts_counted(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.db", "s-a", ['{"n": 0}', '{"n": 1}'])
    b = shard(tmp_path / "b.db", "s-b", ['{"n": 0}'])
    out = tmp_path / "merged.db"
    result = merge_ledgers(out, [a, b])
    assert result.tables["messages"].added == 3 and result.tables["messages"].conflicts == 0
    assert merge_ledgers(out, [a, b]).tables["messages"].added == 0
    with Ledger(out) as ledger:
        assert [m.body for m in ledger.messages("s-a")] == ['{"n": 0}', '{"n": 1}']
        assert [m.body for m in ledger.messages("s-b")] == ['{"n": 0}']
    clash = shard(tmp_path / "c.db", "s-a", ['{"n": "other"}'])
    result = merge_ledgers(out, [clash])
    assert result.tables["messages"].conflicts == 1 and result.tables["messages"].added == 0
    with Ledger(out) as ledger:
        assert ledger.messages("s-a")[0].body == '{"n": 0}'  # the row already there is kept
