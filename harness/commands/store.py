"""`hitrate prices` and `hitrate ledger`: the price table and the ledger's summaries."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from hitrate.harness.cli import add_command, fail

# The ledger, price table and rich load when a command runs, not when `hitrate --help` lists it.
if TYPE_CHECKING:
    from hitrate.store.prices import ModelPrice, PriceSchedule, PriceTable, Tier

_GROUPS = ("session", "day", "run", "task", "model", "backend", "kind")  # kind: agent calls "call" vs "keepalive" warm-ups
_DEFAULT_LIMIT = 20
_PRICE_COLUMNS = ("model", "in", "out", "w5m", "w30m", "w1h", "w12h", "read", "min")


def register(app: typer.Typer) -> None:
    add_command(app, "prices", prices_command)
    add_command(app, "ledger", ledger_command)


def prices_command(
    model: str | None = typer.Option(None, "--model", "-m", help="Only models whose name or alias contains this text."),
    prices: Path | None = typer.Option(
        None, "--prices", help="A price file: a hitrate snapshot, or LiteLLM's model_prices_and_context_window.json "
        "merged over the shipped prices (default: $HITRATE_PRICES, the config file's `prices`, else the shipped snapshot)."
    ),
    snapshot: Path | None = typer.Option(None, "--snapshot", hidden=True, help="Same as --prices."),
    litellm: Path | None = typer.Option(None, "--litellm", hidden=True, help="Same as --prices."),
    as_json: bool = typer.Option(False, "--json", help="Print the selected entries as JSON."),
) -> None:
    """Show per-model prices (USD per 1M tokens) with tiers, dates and sources.

    Input, output, cache writes per TTL class and cache reads; long-context and peak-hour tiers;
    the minimum cacheable prompt; the date each price was seen and where. Runs, reports and
    `whatif` use the same price source (--prices, $HITRATE_PRICES or the config file)."""
    from hitrate.harness.price_source import PriceSourceError, price_table

    given = [p for p in (prices, snapshot, litellm) if p is not None]
    if len(given) > 1:
        _fail("give one price file (--prices)")
    try:
        table = price_table(given[0] if given else None)
    except PriceSourceError as exc:
        _fail(f"cannot read prices: {exc}")
    wanted = [m for m in table.models if model is None or _matches(m, model)]
    if not wanted:
        _fail(f"no model matches {model!r} in price snapshot {table.id}")
    if as_json:
        typer.echo(json.dumps([m.model_dump(mode="json") for m in wanted], indent=1))
        return
    _print_prices(table, wanted)


def _print_prices(table: PriceTable, wanted: list[ModelPrice]) -> None:
    """One row per model; columns no listed model has are left out. Tier notes and source URLs are
    long: they go under the table as numbered notes, so the rates stay readable at 80 columns."""
    from rich import box
    from rich.table import Table

    from hitrate.harness.commands.format import console, shrink_to_fit

    notes: list[str] = []
    rows: list[list[str]] = []
    for entry in wanted:
        schedule = entry.current
        base = schedule.tiers[0]
        tiers = _tier_notes(entry, schedule)
        notes.append(f"{entry.model}: " + (f"{tiers}; " if tiers != "-" else "")
                     + f"as of {schedule.as_of.isoformat()}; source {schedule.source}")  # fmt: skip
        rows.append([
            entry.model + ("" if schedule.confirmed else " (?)"),
            *(_money(v) for v in (base.input, base.output, base.write_5m, base.write_30m, base.write_1h, base.write_12h, base.read)),
            "-" if entry.min_cacheable_tokens is None else f"{entry.min_cacheable_tokens:,}",
        ])  # fmt: skip
    keep = [i for i, column in enumerate(_PRICE_COLUMNS) if column == "model" or any(r[i] != "-" for r in rows)]
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for i in keep:
        column = _PRICE_COLUMNS[i]
        if column == "model":
            out.add_column(column, no_wrap=True, overflow="ellipsis")
        else:
            # Rates are never cut: only the model name gives way on a narrow terminal.
            width = max(len(column), *(len(r[i]) for r in rows))
            out.add_column(column, justify="right", no_wrap=True, min_width=width)
    for row in rows:
        out.add_row(*(row[i] for i in keep))
    screen = console()
    screen.print(f"prices, USD per 1M tokens (snapshot {table.id}, {table.as_of.isoformat()})", style="bold")
    shrink_to_fit(out, [0], screen)
    screen.print(out)
    screen.print("in, out: input and output; w5m … w12h: cache writes by TTL; read: cache reads; "
                 "min: shortest cacheable prompt, in tokens.", style="dim")
    if any(not e.current.confirmed for e in wanted):
        screen.print("(?): from the source its note names, not yet confirmed on the provider's own price page.",
                     style="dim")
    for note in notes:
        # Notes wrap at spaces (never inside a rate or a URL): each is one line in a wide terminal.
        screen.print(note, overflow="fold")


def ledger_command(
    by: str = typer.Option("session", "--by", help=f"Group calls by {' | '.join(_GROUPS)}."),
    since: str | None = typer.Option(
        None, "--since", help="Only calls since this UTC date or time (2026-11-30, 2026-11-30T14:00) or this long ago (90m, 12h, 7d)."
    ),
    limit: int | None = typer.Option(
        None, "--limit", "-n", min=0, help=f"Show this many groups, newest first (default {_DEFAULT_LIMIT} sessions, all other groups; 0: all)."
    ),
    db: Path | None = typer.Option(None, "--db", help="Ledger file (default: $HITRATE_DB or the user data directory)."),
    run: str | None = typer.Option(None, "--run", help="Only calls of this run (its id or first characters)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summaries as JSON."),
    flagged: bool = typer.Option(False, "--flagged", help="List the calls whose usage payload held a contradiction."),
    calls: str | None = typer.Option(
        None, "--calls", help="List every request of this session (its id or first characters), one row each: retries, "
        "failed and interrupted attempts with their errors.",
    ),
) -> None:
    """Summarize recorded calls: by session (the default), day, run, task, model, backend or kind.

    Newest first. Sessions show their date, model and first prompt, under a total for each day.
    Per group: calls, token buckets, the Σ-hit ratio Σread / Σ(read + writes + fresh), the share of
    calls that read anything from cache (a different figure), and cost. Calls whose usage payload
    contradicted itself are counted under "flagged" and listed below the table (all of them with
    --flagged)."""
    from hitrate.store.ledger import Ledger, default_ledger_path
    from hitrate.store.ledger_spool import spool_path

    if by not in _GROUPS:
        _fail(f"--by must be one of {', '.join(_GROUPS)}, not {by!r}")
    since_at = _parse_since(since) if since is not None else None
    path = db if db is not None else default_ledger_path()
    if not path.exists():
        # A first look before anything ran is not an error.
        typer.echo(f"no calls recorded yet: there is no ledger at {path} (`hitrate run` or `hitrate demo` starts one)")
        return
    if limit is None:
        limit = _DEFAULT_LIMIT if by == "session" else 0
    from hitrate.harness.commands import ledger_tables as ledger_tables

    with Ledger(path, read_only=True) as ledger:
        if ledger.spooled_rows:
            typer.echo(f"note: {ledger.spooled_rows} row(s) a full disk kept out of the ledger wait in "
                       f"{spool_path(path)}; they are added the next time it is opened with free space", err=True)  # fmt: skip
        if calls is not None:
            from hitrate.harness.commands.ledger_calls import print_calls
            from hitrate.harness.commands.sessions import SessionLookupError, resolve_session

            try:
                session_id = resolve_session(ledger, calls)
            except SessionLookupError as exc:
                _fail(str(exc))
            print_calls(ledger.calls(session_id=session_id), session_id, path, as_json=as_json)
            return
        if run is not None:
            from hitrate.harness.commands.sessions import SessionLookupError, resolve_recorded_id

            try:
                run = resolve_recorded_id(ledger, run, ("run",))  # the shortened id `ledger --by run` prints
            except SessionLookupError as exc:
                _fail(str(exc))
        flagged_rows = ledger.flagged_calls(run_id=run)
        if flagged:
            ledger_tables.print_flagged(flagged_rows, path, as_json=as_json, limit=None)
            return
        if by == "session" and run is None and not as_json:
            from hitrate.harness.commands.sessions import recent_sessions

            sessions = recent_sessions(ledger, since=since_at)
            days = ledger.summarize("day", since=since_at)
            ledger_tables.print_sessions(path, sessions, days, limit=limit, since=since)
            if flagged_rows:
                ledger_tables.print_flagged(flagged_rows, path, as_json=False, limit=ledger_tables.FLAGGED_SHOWN)
            return
        groups = ledger.summarize(by, run_id=run, since=since_at)  # type: ignore[arg-type]
    groups.sort(key=lambda g: g.last_at or datetime.min.replace(tzinfo=timezone.utc), reverse=True)
    if limit:
        groups = groups[:limit]
    if as_json:
        typer.echo(json.dumps([g.model_dump(mode="json") for g in groups], indent=1))
        return
    if not groups:
        typer.echo(f"no calls recorded in {path}" + (f" for run {run}" if run else "") + (f" since {since}" if since else ""))
        return
    ledger_tables.print_groups(by, groups, path)
    if flagged_rows:
        ledger_tables.print_flagged(flagged_rows, path, as_json=False, limit=ledger_tables.FLAGGED_SHOWN)


def _parse_since(text: str) -> datetime:
    """`--since`: a UTC date or date-time, or a span back from now (90m, 12h, 7d, 2w)."""
    value = text.strip()
    match = re.fullmatch(r"(\d+)\s*([mhdw])", value)
    if match:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match.group(2)]
        return datetime.now(timezone.utc) - timedelta(**{unit: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        _fail(f"--since {text!r}: give a date (2026-11-30), a date and time (2026-11-30T14:00) or a span (90m, 12h, 7d)")
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


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
        # Said of the rates in the table row, so it never reads as a fragment after another note.
        parts.append(f"the rates above since {schedule.effective_from.isoformat()}")
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
