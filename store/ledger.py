"""The SQLite ledger: one row per model call, plus runs, tasks, sessions, their transcripts and
price snapshots.

Several processes (parallel eval workers, a TUI and a headless run) may write one file at once.
The file is in WAL mode, every write takes the write lock up front (BEGIN IMMEDIATE) and waits
for it up to `timeout_s`, and rows are plain INSERTs keyed by unique ids, so concurrent writers
neither lose nor duplicate rows; a repeated id is an error, never a silent overwrite.

Within one process, a `Ledger` may be shared by several threads (a UI thread and the worker
threads that run agent turns). They share one connection: a transaction belongs to the whole
connection, so each transaction, and each read, holds the ledger's lock while it runs. A second
thread's write therefore waits for the first one's commit instead of joining its transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from hitrate.store.cost import cost
from hitrate.store.ledger_rows import (  # noqa: F401  _CALL_COLUMNS: re-exported for callers of this module
    _CALL_COLUMNS,
    _FINISH_CALL,
    _INSERT_CALL,
    _call_from_row,
    _call_row,
    _dumps,
    _iso,
    _run_from_row,
    _task_from_row,
    _where,
)
from hitrate.store.ledger_files import connect_read_only, default_ledger_path, make_private, open_failure, writable
from hitrate.store.ledger_schema import SCHEMA_VERSION, migrate, user_version
from hitrate.store.ledger_summaries import GroupSummary, LedgerSummaries
from hitrate.store.ledger_spool import LedgerWriteError, SpoolOp, is_out_of_room, replay_spool, spooled_entries, spooling
from hitrate.store.redaction import redact_json, redact_text, redact_value, redaction_enabled
from hitrate.store.prices import PriceTable
from hitrate.store.records import (
    INTERRUPTED_CALL_ERROR,
    CallRecord,
    MessageRecord,
    RunRecord,
    SessionRecord,
    TaskRecord,
    utc_now,
)

__all__ = ["GroupSummary", "Ledger", "LedgerError", "LedgerWriteError", "default_ledger_path"]

_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, seq, kind, body, recorded_at) VALUES (:session_id, :seq, :kind, :body, :recorded_at)"
)


class LedgerError(Exception):
    """The ledger file cannot be opened: a folder, an unwritable path, or not a SQLite file.
    The message names the path and says what is wrong, fit to show a user as is."""


class Ledger(LedgerSummaries):
    """A ledger file. Use as a context manager or call `close()`.

    Raises `LedgerError` when `path` cannot be opened as a ledger."""

    def __init__(
        self, path: str | Path | None = None, *, timeout_s: float = 60.0, read_only: bool = False,
        redact_secrets: bool | None = None,
    ) -> None:  # fmt: skip
        """`read_only`: the caller only reads. Where the file or its folder cannot be written, the
        file is then opened read-only (no migration: an older schema is a clear `LedgerError`).

        `redact_secrets`: replace known secret shapes in stored transcripts, call errors and task
        details (see `store.redaction`); None: on unless `$HITRATE_REDACT_SECRETS` turns it off."""
        self.path = Path(path) if path is not None else default_ledger_path()
        self.redact_secrets = redaction_enabled() if redact_secrets is None else redact_secrets
        if self.path.is_dir():
            raise LedgerError(f"{self.path} is a directory, not a ledger file")
        self.read_only = read_only and self.path.is_file() and not writable(self.path)
        if self.read_only:
            self._open_read_only(timeout_s)
            return
        if self.path.is_file() and not writable(self.path):
            # SQLite would open it anyway and fail at the first row: a call would go unrecorded.
            raise LedgerError(
                f"cannot write ledger {self.path}: the file or its folder is read-only "
                "(`hitrate ledger`, `report` and `whatif` can still read it)"
            )
        try:
            make_private(self.path)
        except OSError as exc:
            what = "the folder for ledger" if not self.path.parent.is_dir() else "ledger"
            raise LedgerError(f"cannot create {what} {self.path}: {exc.strerror or exc}") from exc
        try:
            # isolation_level=None: this class opens and closes every transaction itself.
            # check_same_thread=False: the connection is shared by this process's threads, each
            # use serialised by `_lock` (see the module docstring).
            conn = sqlite3.connect(str(self.path), timeout=timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from exc
        self.db = Database(conn)
        # Re-entrant: a thread inside `transaction()` calls methods that take the lock again.
        self._lock = threading.RLock()
        self._saved_snapshots: set[str] = set()
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            self._enable_wal(conn)
            # NORMAL is durable in WAL mode except for the last commits on power loss; it spares
            # an fsync per commit, which is what makes thousands of single-row commits a second
            # possible.
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self.db)
            self.spooled_rows = self._replay_spool()
            """Rows still waiting in the spool journal (the file had no room to take them yet)."""
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerError(open_failure(self.path, exc)) from exc
        except BaseException:
            conn.close()
            raise

    def _open_read_only(self, timeout_s: float) -> None:
        try:
            conn = connect_read_only(self.path, timeout_s=timeout_s)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path} read-only: {exc}") from exc
        self.db = Database(conn)
        self._lock = threading.RLock()
        self._saved_snapshots = set()
        self.spooled_rows = len(spooled_entries(self.path))  # added by the next writable open
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            found = user_version(self.db)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerError(open_failure(self.path, exc)) from exc
        if found != SCHEMA_VERSION:
            conn.close()
            if found > SCHEMA_VERSION:
                raise LedgerError(f"ledger {self.path} has schema version {found}, newer than this hitrate "
                                  f"understands ({SCHEMA_VERSION}); upgrade hitrate to read it")  # fmt: skip
            raise LedgerError(
                f"ledger {self.path} is read-only and has schema version {found}; this hitrate reads version "
                f"{SCHEMA_VERSION}. Open it once where it can be written (any hitrate command, on the file or "
                "a copy) to migrate it."
            )

    @staticmethod
    def _enable_wal(conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch the ledger to WAL mode (got {mode!r})")

    # ---- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self.db.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return user_version(self.db)

    @contextmanager
    def transaction(self) -> Iterator[Ledger]:
        """Group writes into one transaction (much faster for many rows). Re-entrant: writes
        inside join the outer transaction; all of it is committed or rolled back together.
        Other threads' reads and writes wait until it ends."""
        with self._lock:
            conn = self.db.conn
            if conn.in_transaction:
                yield self
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield self
                conn.execute("COMMIT")
            except BaseException:
                # SQLite has already rolled back a transaction a full disk broke off.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._saved_snapshots.clear()  # a snapshot stored in this transaction is gone too
                raise

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """The ledger's SQLite connection, for SQL the ledger has no method for (attaching another
        file to merge it in, checks on the raw rows). This thread holds it until the block ends;
        other threads' reads and writes wait. The connection is in autocommit mode: group writes
        in `transaction()` inside the block (the lock is re-entrant). Do not keep it afterwards."""
        with self._lock:
            yield self.db.conn

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        """Rows of one read as dicts, read whole while the lock is held (a lazy cursor would
        outlive it)."""
        with self._lock:
            cursor = self.db.conn.execute(sql, tuple(params))
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, values, strict=True)) for values in cursor.fetchall()]

    # ---- runs, tasks, sessions ---------------------------------------------------------------

    def start_run(self, label: str | None = None, config: dict[str, Any] | None = None, *, run_id: str | None = None) -> RunRecord:
        run = RunRecord(label=label, config=config or {}, **({"id": run_id} if run_id else {}))
        with self.transaction():
            self.db["runs"].insert(
                {
                    "id": run.id,
                    "started_at": _iso(run.started_at),
                    "finished_at": None,
                    "label": run.label,
                    "status": run.status,
                    "config": _dumps(run.config),
                }
            )
        return run

    def finish_run(self, run_id: str, status: str = "finished", finished_at: datetime | None = None) -> RunRecord:
        self._update("runs", run_id, {"status": status, "finished_at": _iso(finished_at or utc_now())})
        return self.get_run(run_id)

    def start_task(self, name: str, run_id: str | None = None, *, task_id: str | None = None, detail: dict[str, Any] | None = None) -> TaskRecord:
        task = TaskRecord(name=name, run_id=run_id, detail=detail or {}, **({"id": task_id} if task_id else {}))
        with self.transaction():
            self.db["tasks"].insert(
                {
                    "id": task.id,
                    "run_id": task.run_id,
                    "name": task.name,
                    "started_at": _iso(task.started_at),
                    "finished_at": None,
                    "outcome": None,
                    "detail": _dumps(task.detail),
                }
            )
        return task

    def finish_task(self, task_id: str, outcome: str, detail: dict[str, Any] | None = None, finished_at: datetime | None = None) -> TaskRecord:
        changes: dict[str, Any] = {"outcome": outcome, "finished_at": _iso(finished_at or utc_now())}
        if detail is not None:
            # Grading output lands here: a failing test may print the environment or a config file.
            changes["detail"] = _dumps(redact_value(detail) if self.redact_secrets else detail)
        self._update("tasks", task_id, changes)
        return self.get_task(task_id)

    def start_session(
        self,
        run_id: str | None = None,
        task_id: str | None = None,
        *,
        backend: str | None = None,
        model: str | None = None,
        label: str | None = None,
        session_id: str | None = None,
        workspace: str | None = None,
        model_spec: str | None = None,
    ) -> SessionRecord:
        session = SessionRecord(
            run_id=run_id, task_id=task_id, backend=backend, model=model, label=label, workspace=workspace,
            model_spec=model_spec, **({"id": session_id} if session_id else {})
        )
        with self.transaction():
            self.db["sessions"].insert({**session.model_dump(), "started_at": _iso(session.started_at)})
        return session

    def get_run(self, run_id: str) -> RunRecord:
        return _run_from_row(self._get("runs", run_id))

    def get_task(self, task_id: str) -> TaskRecord:
        return _task_from_row(self._get("tasks", task_id))

    def get_session(self, session_id: str) -> SessionRecord:
        return SessionRecord(**self._get("sessions", session_id))

    def runs(self) -> list[RunRecord]:
        return [_run_from_row(r) for r in self._query("SELECT * FROM runs ORDER BY started_at, id")]

    def tasks(self, run_id: str | None = None) -> list[TaskRecord]:
        where, params = _where({"run_id": run_id})
        return [_task_from_row(r) for r in self._query(f"SELECT * FROM tasks {where} ORDER BY started_at, id", params)]

    def sessions(self, run_id: str | None = None, *, with_messages: bool = False) -> list[SessionRecord]:
        """Sessions in the order they started; `with_messages`: only those with a stored transcript."""
        where, params = _where({"run_id": run_id})
        if with_messages:
            has = "id IN (SELECT DISTINCT session_id FROM messages)"
            where = f"{where} AND {has}" if where else f"WHERE {has}"
        return [SessionRecord(**r) for r in self._query(f"SELECT * FROM sessions {where} ORDER BY started_at, rowid", params)]

    # ---- transcripts -------------------------------------------------------------------------

    def append_message(self, message: MessageRecord) -> MessageRecord:
        """Store one transcript entry (its own transaction, unless inside `transaction()`). The
        body must be JSON text; an entry already stored at that position is an error, never
        overwritten."""
        try:
            json.loads(message.body)
        except json.JSONDecodeError as exc:
            raise ValueError(f"message {message.seq} of session {message.session_id} is not JSON: {exc}") from exc
        if self.redact_secrets:
            message = message.model_copy(update={"body": redact_json(message.body)})
        row = {"session_id": message.session_id, "seq": message.seq, "kind": message.kind, "body": message.body,
               "recorded_at": _iso(message.recorded_at)}
        try:
            with self._spooling("message", row), self.transaction():
                self.db.conn.execute(_INSERT_MESSAGE, row)
        except sqlite3.IntegrityError as exc:
            raise sqlite3.IntegrityError(
                f"session {message.session_id} already has a message {message.seq} in {self.path} "
                "(is the session open in another process?)"
            ) from exc
        return message

    def messages(self, session_id: str, *, kind: str | None = None, limit: int | None = None) -> list[MessageRecord]:
        """A session's stored transcript entries in order (only those of `kind`, the first `limit`)."""
        where, params = _where({"session_id": session_id, "kind": kind})
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._query(f"SELECT * FROM messages {where} ORDER BY seq{tail}", params)
        return [MessageRecord(**r) for r in rows]

    # ---- calls -------------------------------------------------------------------------------

    def record_call(self, call: CallRecord, *, price_table: PriceTable | None = None) -> CallRecord:
        """Insert one call (one transaction, unless inside `transaction()`). With `price_table`
        and no cost on the record, the cost is computed and the snapshot stored alongside.
        `LedgerWriteError` when the file has no room: the row went to the spool journal."""
        call = self.priced(call, price_table)
        row = _call_row(call)
        with self._spooling("call", row), self.transaction():
            if price_table is not None:
                self._save_snapshot_in_txn(price_table)
            self.db.conn.execute(_INSERT_CALL, row)
        return call

    def begin_call(self, call: CallRecord, *, price_table: PriceTable | None = None) -> CallRecord:
        """Insert `call` as a pending row, before its request is sent: if the process dies during
        the call, the row stays, saying it was interrupted. Complete it with `finish_call`. The
        price snapshot is stored now, so completing the row needs no more than the row itself.
        `LedgerWriteError` when the file has no room (then no request should be sent)."""
        pending = call.model_copy(update={"state": "pending", "error": INTERRUPTED_CALL_ERROR})
        try:
            with self.transaction():
                if price_table is not None:
                    self._save_snapshot_in_txn(price_table)
                self.db.conn.execute(_INSERT_CALL, _call_row(pending))
        except sqlite3.OperationalError as exc:
            if not is_out_of_room(exc):
                raise
            raise LedgerWriteError(
                f"cannot write ledger {self.path}: {exc}; the call was not sent, so nothing was spent on it", spooled_to=None
            ) from exc
        return pending

    def finish_call(self, call: CallRecord, *, price_table: PriceTable | None = None) -> CallRecord:
        """Complete the pending row `call.id` with `call` (state "done"), priced as `record_call`
        prices. A row already done is never overwritten (IntegrityError). `LedgerWriteError` when
        the file has no room: the finished row went to the spool journal, to be added on next open."""
        call = self.priced(call.model_copy(update={"state": "done"}), price_table)
        row = _call_row(call)
        with self._spooling("call", row), self.transaction():
            if price_table is not None:
                self._save_snapshot_in_txn(price_table)
            changed = self.db.conn.execute(_FINISH_CALL, row).rowcount
        if changed != 1:
            raise sqlite3.IntegrityError(f"call {call.id} in {self.path} is already complete; it is never overwritten")
        return call

    def record_calls(self, calls: Iterable[CallRecord], *, price_table: PriceTable | None = None) -> int:
        """Insert many calls in one transaction; all or none are stored. Returns the count."""
        rows = [_call_row(self.priced(c, price_table)) for c in calls]
        with self.transaction():
            if price_table is not None:
                self._save_snapshot_in_txn(price_table)
            self.db.conn.executemany(_INSERT_CALL, rows)
        return len(rows)

    def calls(
        self,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
        model: str | None = None,
    ) -> list[CallRecord]:
        """Calls matching every given filter, in the order they started."""
        where, params = _where({"session_id": session_id, "run_id": run_id, "task_id": task_id, "model": model})
        # rowid breaks ties in the order the rows were written (a session's calls are sequential).
        rows = self._query(f"SELECT * FROM calls {where} ORDER BY started_at, rowid", params)
        return [_call_from_row(r) for r in rows]

    def flagged_calls(self, *, run_id: str | None = None) -> list[CallRecord]:
        """Calls whose usage payload held a contradiction (non-empty `usage.flags`), in the order
        they started."""
        where, params = _where({"run_id": run_id})
        flagged = "usage_flags IS NOT NULL"
        where = f"{where} AND {flagged}" if where else f"WHERE {flagged}"
        rows = self._query(f"SELECT * FROM calls {where} ORDER BY started_at, rowid", params)
        return [_call_from_row(r) for r in rows]

    def count_calls(self) -> int:
        return int(self._query("SELECT COUNT(*) AS n FROM calls")[0]["n"])

    # ---- price snapshots -----------------------------------------------------------------------

    def save_price_snapshot(self, table: PriceTable) -> str:
        """Store a snapshot (once per id) so calls costed with it can be re-priced later."""
        with self.transaction():
            self._save_snapshot_in_txn(table)
        return table.id

    def price_table(self, snapshot_id: str) -> PriceTable:
        row = self._get("price_snapshots", snapshot_id)
        table = PriceTable.from_json(row["body"])
        if table.id != snapshot_id:
            raise ValueError(f"stored price snapshot {snapshot_id} hashes to {table.id}: the row was altered")
        return table

    # ---- internals -----------------------------------------------------------------------------

    def _spooling(self, op: SpoolOp, row: dict[str, Any]) -> Any:
        """Spool `row` (see `ledger_spool`) when the write inside fails for lack of room."""
        return spooling(self.path, op, row)

    def _replay_spool(self) -> int:
        """Write the rows a full disk left in the spool journal; how many still wait there."""
        with self._lock:
            return replay_spool(self.db.conn, self.path, finish_call=_FINISH_CALL, columns=_CALL_COLUMNS,
                                insert_message=_INSERT_MESSAGE)

    def priced(self, call: CallRecord, table: PriceTable | None) -> CallRecord:
        """`call` as stored: its error text redacted (a server may echo a key back), its cost
        computed from `table` unless it has one (or no table is given)."""
        if self.redact_secrets and call.error:
            call = call.model_copy(update={"error": redact_text(call.error)})
        if table is None or call.cost_usd is not None:
            return call
        breakdown = cost(call.usage, call.model, call.started_at, table)
        return call.model_copy(update={"cost_usd": breakdown.total, "price_snapshot_id": table.id})

    def _save_snapshot_in_txn(self, table: PriceTable) -> None:
        if table.id in self._saved_snapshots:
            return
        self.db.conn.execute(
            "INSERT OR IGNORE INTO price_snapshots (id, as_of, stored_at, body) VALUES (?, ?, ?, ?)",
            (table.id, table.as_of.isoformat(), _iso(utc_now()), table.to_json()),
        )
        self._saved_snapshots.add(table.id)

    def _get(self, table: str, key: str) -> dict[str, Any]:
        rows = self._query(f"SELECT * FROM {table} WHERE id = ?", (key,))
        if not rows:
            raise KeyError(f"no {_row_noun(table)} with id {key!r} in {self.path}")
        return rows[0]

    def _update(self, table: str, key: str, changes: dict[str, Any]) -> None:
        sets = ", ".join(f"{column} = ?" for column in changes)
        with self.transaction():
            cursor = self.db.conn.execute(f"UPDATE {table} SET {sets} WHERE id = ?", (*changes.values(), key))
            if cursor.rowcount != 1:
                raise KeyError(f"no {_row_noun(table)} with id {key!r} in {self.path}")


# ---- row conversion ------------------------------------------------------------------------------


def _row_noun(table: str) -> str:
    """"price_snapshots" -> "price snapshot": what one row of `table` is called in messages."""
    return table[:-1].replace("_", " ")
