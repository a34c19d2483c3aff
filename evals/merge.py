"""Merge ledgers written on several machines (e.g. the shards of one eval run) into one file.

Every row has a globally unique id (time-ordered random ids), so merging is a union by id:
- calls, sessions and price snapshots never change once written: a row already present is left
  as it is (a differing row with the same id is counted as a conflict and reported);
- a task row can be finished later (a resumed shard): the finished or later-finished version wins;
- a run row shared by shards (started with the same `--run-id`) is combined: earliest start,
  latest finish, the least finished status, and the list of shards merged into it;
- stored transcript entries are keyed by (session, position) and never change either: one already
  present is kept, a differing one at the same position is a conflict.

Merging the same inputs again adds nothing. Inputs are read from a consistent snapshot copy
(brought to the current schema there), so they are never modified.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

from pydantic import BaseModel

from hitrate.store.ledger import Ledger

IMMUTABLE_TABLES = ("price_snapshots", "sessions", "calls")
_STATUS_ORDER = ("running", "interrupted", "failed", "incomplete", "finished")


class MergeError(ValueError):
    """An input that cannot be merged (missing, not a ledger, the output itself, ...)."""


class TableMerge(BaseModel):
    added: int = 0
    updated: int = 0
    conflicts: int = 0


class MergeResult(BaseModel):
    output: str
    inputs: list[str]
    tables: dict[str, TableMerge]


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def _snapshot(source: Path, folder: Path) -> Path:
    """A consistent copy of `source` (WAL included), migrated to the current schema."""
    target = folder / f"in-{len(list(folder.iterdir()))}.db"
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            src.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.DatabaseError as exc:
        raise MergeError(f"{source}: not a readable SQLite ledger ({exc})") from exc
    conn = sqlite3.connect(target)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    if "calls" not in tables and tables:
        raise MergeError(f"{source}: not a hitrate ledger (no calls table)")
    Ledger(target).close()  # migrations run on the copy only
    return target


# Columns that say when this copy of a row was stored, not what the row is.
_BOOKKEEPING: dict[str, frozenset[str]] = {"price_snapshots": frozenset({"stored_at"})}


def _differs(columns: list[str], ignore: frozenset[str] = frozenset()) -> str:
    return " OR ".join(f"NOT (s.{c} IS m.{c})" for c in columns if c != "id" and c not in ignore)


def _merge_immutable(conn: sqlite3.Connection, table: str) -> TableMerge:
    columns = [c for c in _columns(conn, "main", table) if c in set(_columns(conn, "src", table))]
    names = ", ".join(columns)
    added = conn.execute(f"INSERT OR IGNORE INTO main.{table} ({names}) SELECT {names} FROM src.{table}").rowcount
    conflicts = conn.execute(
        f"SELECT COUNT(*) FROM src.{table} s JOIN main.{table} m ON s.id = m.id WHERE {_differs(columns, _BOOKKEEPING.get(table, frozenset()))}"
    ).fetchone()[0]
    return TableMerge(added=added, conflicts=conflicts)


def _merge_messages(conn: sqlite3.Connection) -> TableMerge:
    names = "session_id, seq, kind, body, recorded_at"
    added = conn.execute(f"INSERT OR IGNORE INTO main.messages ({names}) SELECT {names} FROM src.messages").rowcount
    conflicts = conn.execute(
        "SELECT COUNT(*) FROM src.messages s JOIN main.messages m ON s.session_id = m.session_id AND s.seq = m.seq "
        "WHERE NOT (s.kind IS m.kind AND s.body IS m.body)"
    ).fetchone()[0]
    return TableMerge(added=added, conflicts=conflicts)


def _merge_tasks(conn: sqlite3.Connection) -> TableMerge:
    columns = [c for c in _columns(conn, "main", "tasks") if c in set(_columns(conn, "src", "tasks"))]
    names = ", ".join(columns)
    added = conn.execute(f"INSERT OR IGNORE INTO main.tasks ({names}) SELECT {names} FROM src.tasks").rowcount
    differing = conn.execute(
        f"SELECT {', '.join('s.' + c for c in columns)}, m.outcome, m.finished_at "
        f"FROM src.tasks s JOIN main.tasks m ON s.id = m.id WHERE {_differs(columns)}"
    ).fetchall()
    result = TableMerge(added=added)
    for row in differing:
        incoming = dict(zip(columns, row[: len(columns)]))
        main_outcome, main_finished = row[len(columns)], row[len(columns) + 1]
        newer = incoming["outcome"] is not None and (
            main_outcome is None or (main_finished or "") < (incoming["finished_at"] or "")
        )
        if newer:
            sets = ", ".join(f"{c} = ?" for c in columns if c != "id")
            conn.execute(f"UPDATE main.tasks SET {sets} WHERE id = ?", [incoming[c] for c in columns if c != "id"] + [incoming["id"]])
            result.updated += 1
        elif not (incoming["outcome"] is None and main_outcome is not None):
            result.conflicts += 1
    return result


def _combined_config(main: dict, incoming: dict) -> dict | None:
    """The configs of one run from two shards, or None when they differ beyond the shard."""

    def without_shard(config: dict) -> dict:
        out = {k: v for k, v in config.items() if k not in ("shard", "merged_shards")}
        if isinstance(out.get("settings"), dict):
            out["settings"] = {k: v for k, v in out["settings"].items() if k != "shard"}
        return out

    if without_shard(main) != without_shard(incoming):
        return None
    shards = set(main.get("merged_shards") or []) | set(incoming.get("merged_shards") or [])
    shards |= {s for s in (main.get("shard"), incoming.get("shard")) if s}
    combined = dict(main)
    if shards:
        combined["merged_shards"] = sorted(shards)
    return combined


def _dumps(value: dict) -> str:
    # The ledger's own JSON spelling, so an unchanged config compares equal.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _merge_runs(conn: sqlite3.Connection) -> TableMerge:
    columns = [c for c in _columns(conn, "main", "runs") if c in set(_columns(conn, "src", "runs"))]
    names = ", ".join(columns)
    added = conn.execute(f"INSERT OR IGNORE INTO main.runs ({names}) SELECT {names} FROM src.runs").rowcount
    result = TableMerge(added=added)
    pairs = conn.execute(
        "SELECT s.id, s.started_at, s.finished_at, s.status, s.config, m.started_at, m.finished_at, m.status, m.config "
        "FROM src.runs s JOIN main.runs m ON s.id = m.id"
    ).fetchall()
    for run_id, s_start, s_end, s_status, s_config, m_start, m_end, m_status, m_config in pairs:
        config = _combined_config(json.loads(m_config or "{}"), json.loads(s_config or "{}"))
        if config is None:
            result.conflicts += 1
            continue
        ends = [e for e in (s_end, m_end) if e]
        rank = {s: i for i, s in enumerate(_STATUS_ORDER)}
        status = min((s_status, m_status), key=lambda s: rank.get(s, -1))
        merged = (min(s_start, m_start), max(ends) if ends else None, status, _dumps(config))
        if merged != (m_start, m_end, m_status, _dumps(json.loads(m_config or "{}"))):
            conn.execute("UPDATE main.runs SET started_at = ?, finished_at = ?, status = ?, config = ? WHERE id = ?", (*merged, run_id))
            result.updated += 1
    return result


def merge_ledgers(output: str | Path, inputs: list[str | Path]) -> MergeResult:
    """Merge `inputs` into `output` (created when missing); see the module docstring."""
    output = Path(output)
    if not inputs:
        raise MergeError("name at least one ledger to merge")
    sources = [Path(p) for p in inputs]
    for source in sources:
        if not source.is_file():
            raise MergeError(f"{source}: no such ledger file")
        if output.exists() and source.resolve() == output.resolve():
            raise MergeError(f"{source} is the output file; merge into a new or another file")
    tables = {name: TableMerge() for name in ("runs", "tasks", *IMMUTABLE_TABLES, "messages")}
    with tempfile.TemporaryDirectory(prefix="hitrate-merge-") as tmp:
        snapshots = [_snapshot(source, Path(tmp)) for source in sources]
        # Each source is attached to the ledger's connection, and ATTACH cannot run inside a
        # transaction: the connection itself is held for the whole merge, not just each transaction.
        with Ledger(output) as ledger, ledger.connection() as conn:
            for snapshot in snapshots:
                conn.execute("ATTACH DATABASE ? AS src", (str(snapshot),))
                try:
                    with ledger.transaction():
                        step = {"runs": _merge_runs(conn), "tasks": _merge_tasks(conn)}
                        step.update({t: _merge_immutable(conn, t) for t in IMMUTABLE_TABLES})
                        step["messages"] = _merge_messages(conn)
                finally:
                    conn.execute("DETACH DATABASE src")
                for name, part in step.items():
                    total = tables[name]
                    tables[name] = TableMerge(
                        added=total.added + part.added, updated=total.updated + part.updated, conflicts=total.conflicts + part.conflicts
                    )
    return MergeResult(output=str(output), inputs=[str(s) for s in sources], tables=tables)
