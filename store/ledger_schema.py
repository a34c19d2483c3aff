"""Ledger schema, built by forward migrations.

`PRAGMA user_version` holds how many entries of `MIGRATIONS` a file has had applied. Opening a
file runs the missing ones in order, inside one write transaction, so two processes opening a
fresh file at once cannot both migrate it. Never edit a released migration: append a new one.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlite_utils import Database

# The `Usage` fields stored as columns of `calls` by the first migration. Spelled out rather than read
# from `Usage`, so that a field added to `Usage` cannot silently change what a released migration creates.
USAGE_COLUMNS: dict[str, type] = {
    "fresh_input": int,
    "cache_write_5m": int,
    "cache_write_30m": int,
    "cache_write_1h": int,
    "cache_write_12h": int,
    "cache_read": int,
    "output": int,
    "reasoning": int,
    "prompt_total": int,
}


# The `Usage` fields added by the sixth migration: charges outside the token buckets and the flags
# naming what was surprising in the payload (JSON list of "code: detail" strings).
USAGE_EXTRA_COLUMNS: dict[str, type] = {
    "web_search_requests": int,
    "web_fetch_requests": int,
    "inference_geo": str,
    "speed": str,
    "service_tier": str,
    "usage_flags": str,
}


class LedgerVersionError(RuntimeError):
    """The file was written by a newer hitrate (its schema version is ahead of this code)."""


def _v1_tables(db: Database) -> None:
    db["runs"].create(
        {"id": str, "started_at": str, "finished_at": str, "label": str, "status": str, "config": str},
        pk="id",
        not_null={"started_at", "status"},
    )
    db["tasks"].create(
        {
            "id": str,
            "run_id": str,
            "name": str,
            "started_at": str,
            "finished_at": str,
            "outcome": str,
            "detail": str,
        },
        pk="id",
        not_null={"name", "started_at"},
    )
    db["sessions"].create(
        {
            "id": str,
            "run_id": str,
            "task_id": str,
            "started_at": str,
            "backend": str,
            "model": str,
            "label": str,
        },
        pk="id",
        not_null={"started_at"},
    )
    db["calls"].create(
        {
            "id": str,
            "run_id": str,
            "task_id": str,
            "session_id": str,
            "backend": str,
            "model": str,
            "started_at": str,
            "ttft_s": float,
            "latency_s": float,
            "section_hashes": str,
            **USAGE_COLUMNS,
            "raw_usage": str,
            "price_snapshot_id": str,
            "cost_usd": float,
            "miss_reason": str,
            "miss_tokens": int,
            "miss_cost_usd": float,
            "error": str,
        },
        pk="id",
        not_null={"backend", "model", "started_at"},
    )
    db["price_snapshots"].create(
        {"id": str, "as_of": str, "stored_at": str, "body": str},
        pk="id",
        not_null={"as_of", "body"},
    )


def _v2_eval_tags_and_indexes(db: Database) -> None:
    # Evals compare prompt layouts and cold / warm caches side by side: tag each call.
    db["calls"].add_column("layout", str)
    db["calls"].add_column("cache_mode", str)
    for column in ("run_id", "task_id", "session_id", "model", "started_at"):
        db["calls"].create_index([column], if_not_exists=True)
    db["tasks"].create_index(["run_id"], if_not_exists=True)
    db["sessions"].create_index(["run_id"], if_not_exists=True)


def _v3_call_sections(db: Database) -> None:
    # What-if replay re-runs a provider's cache rules over recorded requests: it needs each
    # section's token count and block layout, not only its hash. NULL for calls recorded earlier.
    db["calls"].add_column("sections_json", str)


def _v4_session_messages(db: Database) -> None:
    # A session is resumable from the ledger alone: its transcript is stored as it grows, one row
    # per entry, in order (`seq` from 0). Rows are only ever inserted, so a crash loses nothing
    # already written and a second writer of the same entry is refused by the primary key.
    db["messages"].create(
        {"session_id": str, "seq": int, "kind": str, "body": str, "recorded_at": str},
        pk=("session_id", "seq"),
        not_null={"session_id", "seq", "kind", "body", "recorded_at"},
    )
    # What a resume needs besides the transcript: where the session worked and the model spec
    # it started with (the `model` column holds only the wire name). NULL for older sessions.
    db["sessions"].add_column("workspace", str)
    db["sessions"].add_column("model_spec", str)


def _v5_call_kind(db: Database) -> None:
    # Not every call is an agent step: a keep-alive warm-up re-sends the last request only to keep
    # its cached prefix alive. It costs money, so it is a row like any other, tagged so reports can
    # show warm-ups apart. NULL: an ordinary call (and every call recorded earlier).
    db["calls"].add_column("kind", str)


def _v6_usage_charges_and_flags(db: Database) -> None:
    # A call is never lost to its usage: a payload that contradicts itself is stored with its best
    # reading and flags naming the contradiction. Server-tool requests (billed per request) and the
    # geography / speed a provider says it applied change the price, so they are stored too.
    # NULL for calls recorded earlier (no flags were known then).
    for column in ("web_search_requests", "web_fetch_requests", "inference_geo", "speed", "usage_flags"):
        db["calls"].add_column(column, USAGE_EXTRA_COLUMNS[column])


def _v7_attempts_and_pending_rows(db: Database) -> None:
    # Every attempt of a call is a row, the failed ones included: `attempt` counts them from 1 and
    # `retry_of` names the first attempt's row, so a retried call reads as one call with its
    # attempts. A row is written `pending` before its request is sent and completed (`done`) after,
    # so a process killed during a call still leaves its row. NULL for rows recorded earlier: one
    # attempt, done.
    db["calls"].add_column("attempt", int)
    db["calls"].add_column("retry_of", str)
    db["calls"].add_column("state", str)
    db["calls"].create_index(["retry_of"], if_not_exists=True)


def _v8_service_tier(db: Database) -> None:
    # The service tier a provider says it applied (Anthropic `usage.service_tier`: batch is billed
    # at half price) changes the price. Some version-6 files already have the column: releases
    # between the two added it in the version-6 step, so it is added only where it is missing.
    if "service_tier" not in db["calls"].columns_dict:
        db["calls"].add_column("service_tier", USAGE_EXTRA_COLUMNS["service_tier"])


MIGRATIONS: list[Callable[[Database], None]] = [
    _v1_tables,
    _v2_eval_tags_and_indexes,
    _v3_call_sections,
    _v4_session_messages,
    _v5_call_kind,
    _v6_usage_charges_and_flags,
    _v7_attempts_and_pending_rows,
    _v8_service_tier,
]

SCHEMA_VERSION = len(MIGRATIONS)


def user_version(db: Database) -> int:
    return int(db.conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: Database, target: int = SCHEMA_VERSION) -> int:
    """Bring the file to schema `target`; returns the version it had before. The caller holds
    no transaction; this one takes the write lock first (BEGIN IMMEDIATE) and re-reads the
    version under it."""
    if not 0 <= target <= SCHEMA_VERSION:
        raise ValueError(f"schema target {target} outside 0..{SCHEMA_VERSION}")
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        before = user_version(db)
        if before > SCHEMA_VERSION:
            raise LedgerVersionError(
                f"ledger schema version {before} is newer than this hitrate understands ({SCHEMA_VERSION}); "
                "upgrade hitrate to open it"
            )
        for step in MIGRATIONS[before:target]:
            step(db)
        if target > before:
            db.conn.execute(f"PRAGMA user_version = {int(target)}")
        db.conn.execute("COMMIT")
    except BaseException:
        db.conn.execute("ROLLBACK")
        raise
    return before
