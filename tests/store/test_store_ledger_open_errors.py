"""Paths that cannot be a ledger fail with one clear `LedgerError`, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.store.ledger import Ledger, LedgerError


def test_a_folder_is_not_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="is a directory, not a ledger file"):
        Ledger(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_non_sqlite_file_is_refused_and_left_intact(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, just text that is long enough to fill a header page\n" * 20)
    before = notes.read_bytes()
    with pytest.raises(LedgerError, match="is not a SQLite ledger file"):
        Ledger(notes)
    assert notes.read_bytes() == before


def test_a_path_below_a_file_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    with pytest.raises(LedgerError, match="cannot create the folder for ledger"):
        Ledger(blocker / "sub" / "ledger.db")
