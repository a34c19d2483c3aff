"""Rows the ledger file could not take (the disk is full, an I/O error), kept in a journal next to
it and added on the next open.

A call the provider served has been billed; losing its row because the disk filled up would make
every total after it wrong. So a write that SQLite refuses for lack of space is appended, as one
JSON line, to `<ledger>.spool.jsonl` (a few hundred bytes, where SQLite needed whole pages), flushed
and fsync'd, and the caller gets a `LedgerWriteError` saying where the row went. The next time the
ledger is opened with room to spare, the spooled rows are written in one transaction and the
journal is removed. If even the journal cannot be written, the error carries the row itself (its
usage included), so that what the call used reaches the user's screen at least.

Replaying is idempotent: a call row completes a pending row or is inserted, never overwriting a row
already done; a transcript entry already stored is left alone.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

SpoolOp = Literal["call", "message"]

_NO_ROOM = ("database or disk is full", "disk i/o error", "no space left")


class LedgerWriteError(Exception):
    """A row the ledger file could not take. `spooled_to` is the journal that holds it instead
    (None when that failed too; the message then carries the row)."""

    def __init__(self, message: str, *, spooled_to: Path | None) -> None:
        super().__init__(message)
        self.spooled_to = spooled_to


def spool_path(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + ".spool.jsonl")


def is_out_of_room(exc: BaseException) -> bool:
    """Whether SQLite refused a write for lack of space (or an I/O error writing it)."""
    return isinstance(exc, sqlite3.OperationalError) and any(text in str(exc).lower() for text in _NO_ROOM)


def spool(ledger_path: Path, op: SpoolOp, row: dict[str, Any], cause: BaseException) -> LedgerWriteError:
    """Append `row` to the journal and return the error to raise (it says where the row went)."""
    path = spool_path(ledger_path)
    line = json.dumps({"op": op, "row": row}, ensure_ascii=False, separators=(",", ":")) + "\n"
    what = "call" if op == "call" else "transcript entry"
    try:
        # O_APPEND: two processes spooling at once never interleave within a line.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return LedgerWriteError(
            f"cannot write ledger {ledger_path}: {cause}; the {what} could not be saved to {path} either "
            f"({exc.strerror or exc}). The row, to keep by hand: {line.strip()}",
            spooled_to=None,
        )
    return LedgerWriteError(
        f"cannot write ledger {ledger_path}: {cause}. The {what} was saved to {path} and will be added "
        "to the ledger the next time it is opened with free space",
        spooled_to=path,
    )


def spooled_entries(ledger_path: Path) -> list[tuple[SpoolOp, dict[str, Any]]]:
    """The journal's rows in the order they were spooled. A last line cut short (the process died
    while writing it) is skipped: it was never reported as saved."""
    path = spool_path(ledger_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return []  # no journal (a folder in its place is not one either)
    out: list[tuple[SpoolOp, dict[str, Any]]] = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("op") in ("call", "message") and isinstance(entry.get("row"), dict):
            out.append((entry["op"], entry["row"]))
    return out


def forget_spool(ledger_path: Path) -> None:
    spool_path(ledger_path).unlink(missing_ok=True)


@contextmanager
def spooling(ledger_path: Path, op: SpoolOp, row: dict[str, Any]) -> Iterator[None]:
    """Spool `row` and raise `LedgerWriteError` when the write inside fails for lack of room."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not is_out_of_room(exc):
            raise
        raise spool(ledger_path, op, row, exc) from exc


def replay_spool(
    conn: sqlite3.Connection, ledger_path: Path, *, finish_call: str, columns: Sequence[str], insert_message: str
) -> int:
    """Write the journal's rows into the ledger (`conn`, outside any transaction) in one
    transaction, then remove the journal; returns how many rows still wait there (all of them
    while the file still has no room, 0 once they are in). A call row goes in through `finish_call`
    (completing its pending row, or inserted); a transcript entry unless already there."""
    entries = spooled_entries(ledger_path)
    if not entries:
        return 0
    keep_message = insert_message.replace("INSERT", "INSERT OR IGNORE", 1)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op, row in entries:
                if op == "call":
                    conn.execute(finish_call, {c: row.get(c) for c in columns})
                else:
                    conn.execute(keep_message, row)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError as exc:
        if is_out_of_room(exc):
            return len(entries)
        raise
    forget_spool(ledger_path)
    return 0
