"""How ledger rows map to records and back, and the SQL that sums calls into `UsageTotals`.

Kept apart from `ledger.py` (connections, locking, transactions) so each file has one job."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from hitrate.store.cost import UsageTotals
from hitrate.store.ledger_schema import USAGE_COLUMNS, USAGE_EXTRA_COLUMNS
from hitrate.store.records import CallRecord, RunRecord, TaskRecord
from hitrate.store.usage import BUCKETS, PROMPT_BUCKETS, Usage


def _call_row(call: CallRecord) -> dict[str, Any]:
    usage = call.usage
    return {
        "id": call.id,
        "run_id": call.run_id,
        "task_id": call.task_id,
        "session_id": call.session_id,
        "backend": call.backend,
        "model": call.model,
        "started_at": _iso(call.started_at),
        "ttft_s": call.ttft_s,
        "latency_s": call.latency_s,
        "section_hashes": json.dumps(call.section_hashes),
        **{column: getattr(usage, column) for column in USAGE_COLUMNS},
        "web_search_requests": usage.web_search_requests,
        "web_fetch_requests": usage.web_fetch_requests,
        "inference_geo": usage.inference_geo,
        "speed": usage.speed,
        "service_tier": usage.service_tier,
        "usage_flags": json.dumps(list(usage.flags), ensure_ascii=False) if usage.flags else None,
        "raw_usage": _dumps(call.raw_usage) if call.raw_usage is not None else None,
        "price_snapshot_id": call.price_snapshot_id,
        "cost_usd": call.cost_usd,
        "miss_reason": call.miss_reason,
        "miss_tokens": call.miss_tokens,
        "miss_cost_usd": call.miss_cost_usd,
        "error": call.error,
        "layout": call.layout,
        "cache_mode": call.cache_mode,
        "sections_json": (
            json.dumps([s.model_dump(mode="json") for s in call.sections], separators=(",", ":"))
            if call.sections is not None
            else None
        ),
        "kind": call.kind,
        "attempt": call.attempt,
        "retry_of": call.retry_of,
        "state": call.state,
    }


# The hot path: one prepared statement with named parameters (sqlite3 caches it), rather than
# sqlite-utils' per-call introspection. A plain INSERT: a repeated id raises IntegrityError.
_CALL_COLUMNS = (
    *("id", "run_id", "task_id", "session_id", "backend", "model", "started_at", "ttft_s", "latency_s", "section_hashes"),
    *USAGE_COLUMNS,
    *("raw_usage", "price_snapshot_id", "cost_usd", "miss_reason", "miss_tokens", "miss_cost_usd", "error"),
    *("layout", "cache_mode"),
    "sections_json",
    "kind",
    *USAGE_EXTRA_COLUMNS,
    *("attempt", "retry_of", "state"),
)
_INSERT_CALL = (
    f"INSERT INTO calls ({', '.join(_CALL_COLUMNS)}) VALUES ({', '.join(':' + c for c in _CALL_COLUMNS)})"
)
# Completing a pending row: every column but the id takes the finished record's value. Only a row
# still pending is completed; a row already done is never overwritten (the statement then changes
# nothing, which the ledger reports). With no row yet (its pending insert was spooled, see
# `ledger_spool`), the finished row is inserted.
_FINISH_CALL = (
    _INSERT_CALL
    + " ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _CALL_COLUMNS if c != "id")
    + " WHERE calls.state = 'pending'"
)


def _run_from_row(row: dict[str, Any]) -> RunRecord:
    return RunRecord(**{**row, "config": _loads(row["config"]) or {}})


def _task_from_row(row: dict[str, Any]) -> TaskRecord:
    return TaskRecord(**{**row, "detail": _loads(row["detail"]) or {}})


def _call_from_row(row: dict[str, Any]) -> CallRecord:
    data = dict(row)
    extra = {column: data.pop(column, None) for column in USAGE_EXTRA_COLUMNS}
    flags = tuple(_loads(extra.pop("usage_flags")) or ())
    usage = Usage(**{column: data.pop(column) for column in USAGE_COLUMNS}, **extra, flags=flags)
    data["section_hashes"] = json.loads(data["section_hashes"] or "[]")
    data["raw_usage"] = _loads(data["raw_usage"])
    data["sections"] = _loads(data.pop("sections_json", None))
    # Rows recorded before attempts and pending rows were kept: one attempt, done.
    data["attempt"] = data.get("attempt") or 1
    data["state"] = data.get("state") or "done"
    return CallRecord(**data, usage=usage)


_ALL_PROMPT_KNOWN = " AND ".join(f"{b} IS NOT NULL" for b in PROMPT_BUCKETS)
_PROMPT_SUM = " + ".join(PROMPT_BUCKETS)
_SUMMARY_SELECT = ", ".join(
    [
        "COUNT(*) AS calls",
        *(f"COALESCE(SUM({b}), 0) AS sum_{b}" for b in BUCKETS),
        # A failed call reports no buckets; it is counted as failed, not as unknown in each bucket.
        *(f"COALESCE(SUM(error IS NULL AND {b} IS NULL), 0) AS unknown_{b}" for b in BUCKETS),
        "COUNT(error) AS failed",
        "COUNT(usage_flags) AS flagged",
        "COALESCE(SUM(attempt > 1), 0) AS retries",
        "COALESCE(SUM(state = 'pending'), 0) AS interrupted",
        f"SUM(CASE WHEN {_ALL_PROMPT_KNOWN} THEN cache_read END) AS ratio_read",
        f"SUM(CASE WHEN {_ALL_PROMPT_KNOWN} THEN {_PROMPT_SUM} END) AS ratio_prompt",
        "COUNT(cache_read) AS with_read",
        "COALESCE(SUM(cache_read > 0), 0) AS with_hit",
        "SUM(cost_usd) AS cost",
        "COUNT(cost_usd) AS priced",
    ]
)


def _totals_from_row(row: dict[str, Any]) -> UsageTotals:
    calls = int(row["calls"])
    ratio_prompt = row["ratio_prompt"] or 0
    with_read = int(row["with_read"])
    return UsageTotals(
        calls=calls,
        **{b: int(row[f"sum_{b}"]) for b in BUCKETS},
        unknown={b: int(row[f"unknown_{b}"]) for b in BUCKETS if row[f"unknown_{b}"]},
        hit_ratio=(row["ratio_read"] or 0) / ratio_prompt if ratio_prompt else None,
        calls_with_hit_share=int(row["with_hit"]) / with_read if with_read else None,
        cost_usd=float(row["cost"]) if row["priced"] else None,
        unpriced_calls=calls - int(row["priced"]),
        failed_calls=int(row["failed"]),
        flagged_calls=int(row["flagged"]),
        retries=int(row["retries"]),
        interrupted_calls=int(row["interrupted"]),
    )


def _where(filters: dict[str, str | None]) -> tuple[str, list[str]]:
    given = {k: v for k, v in filters.items() if v is not None}
    if not given:
        return "", []
    return "WHERE " + " AND ".join(f"{k} = ?" for k in given), list(given.values())


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None
