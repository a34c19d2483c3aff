"""`hitrate prices` and `hitrate ledger`: the price table and the ledger's summaries."""

from __future__ import annotations

import json
from datetime import date, timezone
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.table import Table

from hitrate.harness.cli import add_command, fail
from hitrate.store.ledger import ENV_DB, GroupBy, GroupSummary, Ledger, default_ledger_path
from hitrate.store.litellm_import import LiteLLMFormatError, load_litellm_file
from hitrate.store.prices import ModelPrice, PriceSchedule, PriceTable, Tier
from hitrate.store.records import CallRecord

_GROUPS = ("session", "run", "task", "model", "backend", "kind")  # kind: agent calls "(none)" vs "keepalive" warm-ups
_PRICE_COLUMNS = ("model", "input", "output", "w 5m", "w 30m", "w 1h", "w 12h", "read", "min cache", "as of", "note")


def register(app: typer.Typer) -> None:
    add_command(app, "prices", prices_command)
    add_command(app, "ledger", ledger_command)


def prices_command(
    model: str | None = typer.Option(None, "--model", "-m", help="Only models whose name or alias contains this text."),
    snapshot: Path | None = typer.Option(None, "--snapshot", help="Show this price snapshot JSON instead of the shipped one."),
    litellm: Path | None = typer.Option(
        None, "--litellm", help="Show prices imported from a LiteLLM model_prices_and_context_window.json file."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the selected entries as JSON."),
) -> None:
    """Show per-model prices (USD per 1M tokens) with tiers, dates and sources.

    Input, output, cache writes per TTL class and cache reads; long-context and peak-hour tiers;
    the minimum cacheable prompt; the date each price was seen and where."""
    table = _load_table(snapshot, litellm)
    wanted = [m for m in table.models if model is None or _matches(m, model)]
    if not wanted:
        _fail(f"no model matches {model!r} in price snapshot {table.id}")
    if as_json:
        typer.echo(json.dumps([m.model_dump(mode="json") for m in wanted], indent=1))
        return
    # Tier notes and source URLs are long: they go under the table as numbered notes, so the
    # price columns stay readable in an 80-column terminal.
    out = Table(title=f"prices (USD / 1M tokens) - snapshot {table.id}, as of {table.as_of.isoformat()}")
    for column in _PRICE_COLUMNS:
        out.add_column(column, justify="left" if column in ("model", "as of") else "right",
                       no_wrap=column in ("model", "as of"))
    notes: list[str] = []
    for entry in wanted:
        schedule = entry.current
        base = schedule.tiers[0]
        tiers = _tier_notes(entry, schedule)
        notes.append(f"[{len(notes) + 1}] {entry.model}: " + (f"{tiers}; " if tiers != "-" else "") + f"source {schedule.source}")
        out.add_row(
            entry.model + ("" if schedule.confirmed else " (unconfirmed)"),
            _money(base.input),
            _money(base.output),
            _money(base.write_5m),
            _money(base.write_30m),
            _money(base.write_1h),
            _money(base.write_12h),
            _money(base.read),
            "-" if entry.min_cacheable_tokens is None else str(entry.min_cacheable_tokens),
            schedule.as_of.isoformat(),
            str(len(notes)),
        )
    console = Console()
    console.print(out)
    for note in notes:
        console.print(note, highlight=False, soft_wrap=False)


def ledger_command(
    by: str = typer.Option("session", "--by", help=f"Group calls by {' | '.join(_GROUPS)}."),
    db: Path | None = typer.Option(None, "--db", help=f"Ledger file (default: ${ENV_DB} or the user data directory)."),
    run: str | None = typer.Option(None, "--run", help="Only calls of this run id."),
    as_json: bool = typer.Option(False, "--json", help="Print the summaries as JSON."),
    flagged: bool = typer.Option(False, "--flagged", help="List the calls whose usage payload held a contradiction."),
) -> None:
    """Summarize recorded calls by session, run, task, model or backend.

    Per group: calls, token buckets, the Σ-based hit ratio Σread / Σ(read + writes + fresh), the
    share of calls with any cache hit (a different figure), and cost. Calls whose usage payload
    contradicted itself are counted under "flagged" and listed below the table (all of them with
    --flagged)."""
    if by not in _GROUPS:
        _fail(f"--by must be one of {', '.join(_GROUPS)}, not {by!r}")
    path = db if db is not None else default_ledger_path()
    if not path.exists():
        _fail(f"no ledger at {path} (nothing has been recorded there yet)")
    with Ledger(path) as ledger:
        groups = ledger.summarize(by, run_id=run)  # type: ignore[arg-type]
        flagged_rows = ledger.flagged_calls(run_id=run)
    if flagged:
        _print_flagged(flagged_rows, path, as_json=as_json, limit=None)
        return
    if as_json:
        typer.echo(json.dumps([g.model_dump(mode="json") for g in groups], indent=1))
        return
    if not groups:
        typer.echo(f"no calls recorded in {path}" + (f" for run {run}" if run else ""))
        return
    _print_groups(by, groups, path)  # type: ignore[arg-type]
    if flagged_rows:
        _print_flagged(flagged_rows, path, as_json=False, limit=FLAGGED_SHOWN)


FLAGGED_SHOWN = 10
"""Flagged calls listed under the summary table (`--flagged` lists them all)."""


def _print_flagged(calls: list[CallRecord], path: Path, *, as_json: bool, limit: int | None) -> None:
    """The calls whose usage held a contradiction: when, which model, and each flag."""
    if as_json:
        typer.echo(json.dumps([
            {"id": c.id, "started_at": c.started_at.isoformat(), "model": c.model, "flags": list(c.usage.flags),
             "raw_usage": c.raw_usage} for c in calls
        ], indent=1))
        return
    if not calls:
        typer.echo(f"no flagged calls in {path}")
        return
    shown = calls if limit is None else calls[:limit]
    out = Table(title=f"{len(calls)} flagged call(s): usage stored with its best reading and the raw payload")
    out.add_column("call", no_wrap=True)
    out.add_column("started (UTC)", no_wrap=True)
    out.add_column("model", overflow="fold")
    out.add_column("flags", overflow="fold")
    for call in shown:
        started = call.started_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        out.add_row(call.id[:SHORT_ID], started, call.model, "\n".join(call.usage.flags))
    Console().print(out)
    if len(shown) < len(calls):
        typer.echo(f"... and {len(calls) - len(shown)} more: hitrate ledger --flagged")


_ID_GROUPS = ("session", "run", "task")
SHORT_ID = 12
"""Characters of an id shown when the full table does not fit the terminal (as git shortens
commit ids); `--json` always has them whole."""
_WIDE_ENOUGH = 150
"""Console width from which the table shows whole ids."""
_OPTIONAL = {"write 5m": "0", "write 30m": "0", "write 1h": "0", "write 12h": "0", "flagged": "0", "unknown": "-"}
"""Columns shown only when some group has something in them (each provider has its own write
buckets), so the table fits a narrow terminal."""


def _print_groups(by: GroupBy, groups: list[GroupSummary], path: Path) -> None:
    console = Console()
    shorten = by in _ID_GROUPS and console.width < _WIDE_ENOUGH
    title = f"ledger {path} by {by}"
    if shorten:
        title += f" (ids shortened to {SHORT_ID} characters; --json has them whole)"
    rows = [_group_row(by, group, shorten) for group in groups]
    columns = [by, "calls", "failed", "fresh", "write 5m", "write 30m", "write 1h", "write 12h", "read", "output",
               "Σ-hit ratio", "calls with hit", "cost $", "flagged", "unknown"]
    keep = [i for i, column in enumerate(columns)
            if column not in _OPTIONAL or any(row[i] != _OPTIONAL[column] for row in rows)]
    out = Table(title=title)
    for i in keep:
        column = columns[i]
        if column == by:
            # The group key (an id) is what a user copies: never wrapped or folded.
            out.add_column(column, justify="left", no_wrap=True, overflow="ellipsis")
        else:
            out.add_column(column, justify="left" if column == "unknown" else "right", overflow="fold")
    for row in rows:
        out.add_row(*(row[i] for i in keep))
    console.print(out)


def _group_row(by: GroupBy, group: GroupSummary, shorten: bool) -> list[str]:
    t = group.totals
    key = group.key or "(none)"
    name = key[:SHORT_ID] if shorten and group.key else key
    if group.label:
        name += f" {group.label}"
    if group.outcome:
        name += f" [{group.outcome}]"
    cost_text = "-" if t.cost_usd is None else f"{t.cost_usd:.6f}"
    if t.unpriced_calls and t.cost_usd is not None:
        cost_text += f" (+{t.unpriced_calls} unpriced)"
    return [
        name,
        str(t.calls),
        str(t.failed_calls),
        f"{t.fresh_input:,}",
        f"{t.cache_write_5m:,}",
        f"{t.cache_write_30m:,}",
        f"{t.cache_write_1h:,}",
        f"{t.cache_write_12h:,}",
        f"{t.cache_read:,}",
        f"{t.output:,}",
        _percent(t.hit_ratio),
        _percent(t.calls_with_hit_share),
        cost_text,
        str(t.flagged_calls),
        ", ".join(f"{k}: {v}" for k, v in t.unknown.items()) or "-",
    ]


def _load_table(snapshot: Path | None, litellm: Path | None) -> PriceTable:
    if snapshot is not None and litellm is not None:
        _fail("give --snapshot or --litellm, not both")
    try:
        if snapshot is not None:
            return PriceTable.from_file(snapshot)
        if litellm is not None:
            return load_litellm_file(litellm, as_of=date.fromtimestamp(litellm.stat().st_mtime))
    except (OSError, ValueError, LiteLLMFormatError) as exc:
        _fail(f"cannot read prices: {exc}")
    return PriceTable.default()


def _matches(entry: ModelPrice, text: str) -> bool:
    needle = text.lower()
    return any(needle in name.lower() for name in (entry.model, *entry.aliases))


def _tier_notes(entry: ModelPrice, schedule: PriceSchedule) -> str:
    parts = [f"{t.label}: {_rates(t)}" for t in schedule.tiers[1:]]
    if schedule.peak is not None:
        windows = ", ".join(f"{s}-{e}" for s, e in schedule.peak.windows_utc)
        days = " weekdays" if schedule.peak.weekdays_only else ""
        parts.insert(0, "columns show off-peak rates")
        parts.append(f"peak {windows} UTC{days}: {_rates(schedule.peak.tiers[0])}")
    for older in sorted(entry.schedules, key=lambda s: s.effective_from or date.min):
        if older is not schedule and older.effective_until is not None:
            parts.append(f"until {older.effective_until.isoformat()}: {_rates(older.tiers[0])}")
    if schedule.effective_from is not None:
        parts.append(f"since {schedule.effective_from.isoformat()}")
    if not entry.writes_billed:
        parts.append("writes free")
    if schedule.effective_until is not None:
        parts.append(f"no price after {schedule.effective_until.isoformat()}")
    parts.extend(f"{name}: {_rates(levels[0])}" for name, levels in schedule.service_tiers.items())
    for field, modifiers in (("geo", schedule.inference_geo), ("speed", schedule.speed)):
        parts.extend(f"{field} {value} x{m.multiplier:g}" for value, m in modifiers.items())
    parts.extend(f"{name.removesuffix('_requests').replace('_', ' ')} ${fee.usd_per_request:g}/request"
                 for name, fee in schedule.server_tools.items() if fee.usd_per_request)
    return "; ".join(parts) or "-"


def _rates(t: Tier) -> str:
    text = f"in {_money(t.input)} out {_money(t.output)}"
    for label, value in (("w5m", t.write_5m), ("w30m", t.write_30m), ("w1h", t.write_1h), ("w12h", t.write_12h), ("read", t.read)):
        if value is not None:
            text += f" {label} {_money(value)}"
    return text


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _fail(message: str) -> NoReturn:
    fail(message, 1)
