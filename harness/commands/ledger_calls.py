"""`hitrate ledger --calls SESSION`: every row of one session, one per request, in order: retries
beside the attempts they repeat, failed and interrupted attempts with their errors."""

from __future__ import annotations

import json
from datetime import timezone
from pathlib import Path

from rich.text import Text

from hitrate.harness.commands.format import console, money, shrink_to_fit, tokens
from hitrate.harness.commands.ledger_tables import _table
from hitrate.harness.commands.sessions import short_id_length
from hitrate.harness.terminal_text import visible
from hitrate.store.records import CallRecord


def call_outcome(call: CallRecord) -> str:
    """"ok", "failed", or "interrupted" (a row its process never completed)."""
    if call.interrupted:
        return "interrupted"
    return "failed" if call.error else "ok"


def _bucket(value: int | None) -> str:
    return "?" if value is None else tokens(value)


def print_calls(calls: list[CallRecord], session_id: str, path: Path, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps([
            {"id": c.id, "started_at": c.started_at.isoformat(), "model": c.model, "kind": c.kind, "attempt": c.attempt,
             "retry_of": c.retry_of, "state": c.state, "outcome": call_outcome(c), "error": c.error,
             "usage": c.usage.model_dump(mode="json"), "cost_usd": c.cost_usd, "latency_s": c.latency_s} for c in calls
        ], indent=1))  # fmt: skip
        return
    out = console()
    if not calls:
        out.print(f"no calls recorded for session {session_id} in {path}", soft_wrap=True)
        return
    n = short_id_length([c.id for c in calls])
    day = calls[0].started_at.astimezone(timezone.utc).strftime("%Y-%m-%d")
    # Wrapped at the terminal's width like the table below it (a pipe: 80 columns).
    out.print(f"session {session_id[:n]} ({day}): {len(calls)} request(s), one row each (try 2, 3, …: "
              "retries of the call above)", style="bold")  # fmt: skip
    table = _table()
    for name in ("call", "UTC", "try", "outcome", "read", "write", "fresh", "out", "cost", "miss"):
        table.add_column(name, no_wrap=True, justify="right" if name in ("read", "write", "fresh", "out", "cost") else "left")
    for call in calls:
        u = call.usage
        table.add_row(
            call.id[:n], call.started_at.astimezone(timezone.utc).strftime("%H:%M:%S"), str(call.attempt), call_outcome(call),
            _bucket(u.cache_read), _bucket(u.cache_write_total), _bucket(u.fresh_input),
            _bucket(u.output), money(call.cost_usd) if call.cost_usd is not None else "-",
            # Why the cache missed, as the run recorded it ("" for a hit, a first call or a failure).
            visible(call.miss_reason or ""),
        )
    shrink_to_fit(table, [(9, 6)], out)
    out.print(table)
    failed = [c for c in calls if c.error]
    if failed:
        out.print("?: not known (a failed or interrupted request reports no usage). Errors:", style="dim")
    for call in failed:
        # Error text comes from servers and exceptions: shown as plain text, never read as markup,
        # folded at the terminal's width.
        out.print(Text(f"  {call.id[:n]}  {visible(call.error or '')}", overflow="fold"))
