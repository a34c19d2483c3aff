"""The tables `hitrate ledger` prints, laid out for an 80-column terminal.

Token counts are compact (181k, 1.42M) and money has four decimals, so every column keeps its
header on one line; ids are shortened as git shortens commit ids (`--json` has them whole, and
any unique prefix resolves). Columns no group has anything in are left out."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from hitrate.harness.commands.format import console, money, percent, shrink_to_fit, tokens
from hitrate.harness.commands.sessions import SessionLine, short_id_length
from hitrate.harness.terminal_text import visible

if TYPE_CHECKING:
    from rich.console import Console

    from hitrate.store.cost import UsageTotals
    from hitrate.store.records import CallRecord
    from hitrate.store.ledger import GroupSummary

ORDINARY_KIND = "call"
"""How `--by kind` names ordinary agent calls (stored with no kind), beside `keepalive` warm-ups."""

WHOLE_IDS_FROM = 150
"""Terminal width from which tables show whole ids."""

RATIO_LEGEND = "Σ-hit: Σread / Σ(read + write + fresh), all calls together; any-hit: share of calls that read from cache."


def _unpriced(totals: UsageTotals) -> int:
    """Calls that returned but have no price (a failed call has no cost to price)."""
    return max(0, totals.unpriced_calls - totals.failed_calls)


def _cost(totals: UsageTotals) -> str:
    """Money; a `*` marks a sum that leaves out unpriced calls (explained under the table)."""
    if totals.cost_usd is None and totals.calls == totals.failed_calls:
        return "-"
    text = money(totals.cost_usd)
    if totals.cost_usd is not None and _unpriced(totals):
        text += "*"
    return text


def _calls(totals: UsageTotals) -> str:
    """`12`, with `(1✗)` for failed calls, `(1↻)` for retries, `(1?)` for interrupted ones and
    `(2⚑)` for flagged ones (explained under the table)."""
    text = f"{totals.calls}" + (f" ({totals.failed_calls}✗)" if totals.failed_calls else "")
    text += f" ({totals.retries}↻)" if totals.retries else ""
    text += f" ({totals.interrupted_calls}?)" if totals.interrupted_calls else ""
    return text + (f" ({totals.flagged_calls}⚑)" if totals.flagged_calls else "")


def _table() -> Table:
    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))


def _footnotes(all_totals: list[UsageTotals]) -> list[str]:
    notes = [RATIO_LEGEND]
    if any(t.failed_calls for t in all_totals):
        notes.append("n✗: calls that failed (recorded without usage).")
    if any(t.retries for t in all_totals):
        notes.append("n↻: retries (each attempt is a row of its own, counted in calls).")
    if any(t.interrupted_calls for t in all_totals):
        notes.append("n?: calls never completed: cut off when their process ended, or still running (usage unknown; counted in ✗).")
    if any(t.flagged_calls for t in all_totals):
        notes.append("n⚑: calls whose usage payload contradicted itself (listed below; all: --flagged).")
    if any(t.cost_usd is not None and _unpriced(t) for t in all_totals):
        notes.append("*: some calls have no price; the cost is of the priced ones (`hitrate prices`).")
    unknown = defaultdict(int)
    for t in all_totals:
        for bucket, count in t.unknown.items():
            if bucket != "reasoning":  # reasoning is a subset of output most APIs do not report apart
                unknown[bucket] += count
    if unknown:
        notes.append("not reported by the server: " + ", ".join(f"{k} in {v} call(s)" for k, v in sorted(unknown.items())) + ".")
    return notes


def _model_name(model: str | None) -> str:
    """A local model is recorded by its path; its folder name is what identifies it."""
    if not model:
        return "-"
    return visible(model.rstrip("/").rsplit("/", 1)[-1] if model.startswith("/") else model)


def _local_day(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(timezone.utc).date().isoformat()


def print_sessions(path: Path, sessions: list[SessionLine], days: list[GroupSummary], *, limit: int,
                   since: str | None) -> None:
    """Sessions newest first under a total row for each UTC day; times are UTC."""
    out = console()
    shown = sessions[:limit] if limit else sessions
    if not shown:
        out.print(f"no calls recorded in {path}" + (f" since {since}" if since else ""))
        return
    noun = "session" if len(sessions) == 1 else "sessions"
    scope = f"{len(shown)} of {len(sessions)} {noun}" if len(shown) < len(sessions) else f"{len(sessions)} {noun}"
    out.print(f"{scope}, newest first (times in UTC)", style="bold")
    table = _table()
    table.add_column("when", no_wrap=True)
    table.add_column("session", no_wrap=True)
    table.add_column("model", no_wrap=True, overflow="ellipsis")
    table.add_column("first prompt", no_wrap=True, overflow="ellipsis")
    table.add_column("calls", justify="right", no_wrap=True)
    table.add_column("Σ-hit", justify="right", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    per_day = {d.key: d for d in days}
    count_per_day: dict[str, int] = defaultdict(int)
    for line in sessions:
        count_per_day[_local_day(line.started_at)] += 1
    ids = [line.id for line in sessions]
    id_length = max(map(len, ids), default=0) if out.width >= WHOLE_IDS_FROM else short_id_length(ids)
    current_day = None
    for line in shown:
        day = _local_day(line.started_at)
        if day != current_day:
            current_day = day
            totals = per_day[day].totals if day in per_day else None
            n = count_per_day[day]
            table.add_row(
                Text(day, style="bold"), Text(f"{n} session{'s' if n != 1 else ''}", style="bold"), "", "",
                *(Text(cell, style="bold") for cell in
                  ((_calls(totals), percent(totals.hit_ratio), _cost(totals)) if totals else ("", "", ""))),
                end_section=False,
            )  # fmt: skip
        t = line.summary.totals if line.summary else None
        table.add_row(
            "  " + (line.started_at.astimezone(timezone.utc).strftime("%H:%M") if line.started_at else "-"),
            line.id[:id_length],
            _model_name(line.model),
            visible(line.first_prompt) or "-",
            _calls(t) if t else "0",
            percent(t.hit_ratio) if t else "-",
            _cost(t) if t else "-",
        )
    shrink_to_fit(table, [(3, 18), (2, 10), (3, 10)], out)
    out.print(table)
    totals = [s.summary.totals for s in shown if s.summary]
    for note in _footnotes(totals):
        out.print(note, style="dim")
    if len(shown) < len(sessions):
        out.print(f"{len(sessions) - len(shown)} older session(s) not shown: --limit 0 shows all, --since narrows.", style="dim")
    out.print("Continue one: hitrate run --resume <session> \"…\" (a unique prefix of the id is enough).", style="dim")
    _print_path(out, path)


FLAGGED_SHOWN = 10
"""Flagged calls listed under the summary table (`--flagged` lists them all)."""


def print_flagged(calls: list[CallRecord], path: Path, *, as_json: bool, limit: int | None) -> None:
    """The calls whose usage held a contradiction: when, which model, and each flag."""
    import json

    if as_json:
        print(json.dumps([
            {"id": c.id, "started_at": c.started_at.isoformat(), "model": c.model, "flags": list(c.usage.flags),
             "raw_usage": c.raw_usage} for c in calls
        ], indent=1))  # fmt: skip
        return
    out = console()
    if not calls:
        out.print(f"no flagged calls in {path}", soft_wrap=True)
        return
    shown = calls if limit is None else calls[:limit]
    out.print(f"{len(calls)} flagged call(s): usage stored with its best reading and the raw payload", style="bold")
    table = _table()
    table.add_column("call", no_wrap=True)
    table.add_column("started (UTC)", no_wrap=True)
    table.add_column("model", no_wrap=True, overflow="ellipsis")
    table.add_column("flags", overflow="fold")
    n = short_id_length([c.id for c in calls])
    for call in shown:
        started = call.started_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")
        table.add_row(call.id[:n], started, _model_name(call.model), visible("\n".join(call.usage.flags)))
    out.print(table)
    if len(shown) < len(calls):
        out.print(f"... and {len(calls) - len(shown)} more: hitrate ledger --flagged")


def _group_name(by: str, group: GroupSummary, id_length: int, separator: str = " ") -> str:
    """Labels, task names and model names are chosen by users and models: shown with `visible`
    (`separator` goes between an id and its label: a line break in a narrow table)."""
    return "\n".join(visible(part) for part in _raw_group_name(by, group, id_length, separator).split("\n"))


def _raw_group_name(by: str, group: GroupSummary, id_length: int, separator: str = " ") -> str:
    if by == "kind":
        return group.key or ORDINARY_KIND
    if group.key is None:
        return "(none)"
    name = group.key[:id_length] if by in ("session", "run", "task") else group.key
    if by == "model":
        name = _model_name(group.key)
    if group.label:
        name += f"{separator}{group.label}"
    if group.outcome:
        name += f" [{group.outcome}]"
    return name


def print_groups(by: str, groups: list[GroupSummary], path: Path) -> None:
    """One row per group: calls, token buckets, the two hit figures and cost."""
    out = console()
    out.print(f"calls by {by}, newest first", style="bold")
    table = _table()
    # Narrow: a run's or task's label goes under its id, folded, rather than cut to "demo · …" (two
    # demo runs would read the same).
    narrow = out.width < WHOLE_IDS_FROM
    table.add_column(by, no_wrap=not narrow, overflow="fold" if narrow else "ellipsis")
    columns = ["calls", "fresh", "write", "read", "output", "Σ-hit", "any-hit", "cost"]
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    ids = [g.key for g in groups if g.key]
    # Whole ids where they fit: `hitrate report` and `whatif` take a run id whole.
    id_length = max(map(len, ids), default=0) if out.width >= WHOLE_IDS_FROM else short_id_length(ids)
    for group in groups:
        t = group.totals
        table.add_row(
            _group_name(by, group, id_length, "\n" if narrow and by in ("run", "task", "session") else " "),
            _calls(t),
            tokens(t.fresh_input),
            tokens(t.cache_write_total),
            tokens(t.cache_read),
            tokens(t.output),
            percent(t.hit_ratio),
            percent(t.calls_with_hit_share, 0),
            _cost(t),
        )
    if not narrow:
        shrink_to_fit(table, [0], out, floor=10)
    out.print(table)
    for note in _footnotes([g.totals for g in groups]):
        out.print(note, style="dim")
    _print_path(out, path)


def _print_path(out: Console, path: Path) -> None:
    # On a line of its own and never wrapped: a path is copied whole.
    out.print(f"ledger: {path}", style="dim", soft_wrap=True)
