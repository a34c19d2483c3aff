"""Several eval runs side by side as a leaderboard: one row per run and configuration.

Each row carries what was compared (model, prompt layout, cache mode, policy, tries, output
budget, suite) and what came out: the pass rate with its 95% Wilson interval, total cost, cost
per passed task, the hit ratio Σread / Σ(read + writes + fresh), and the task wall time at p50.
The figures are the report's own (`report.build_report`, one run at a time), so a leaderboard
row and that run's report never disagree.

Runs are comparable only on the same task set. A row's `task_set` is a digest of the names of
the tasks it ran (the tasks the machine could not run are not in it); the leaderboard's reference
set is the one most runs share (the first run's on a tie), and a row on another set is marked
`comparable = false`, ranked after the comparable ones, and never given a rank. The schema is
documented in docs/leaderboard.md; `SCHEMA_VERSION` changes with any change to the fields.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from hitrate.evals.report import Block, ReportError, build_report
from hitrate.evals.runner import RUN_KIND
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.store.records import RunRecord, utc_now

SCHEMA_VERSION = 1


class LeaderboardRow(BaseModel):
    """One run (and configuration) of the leaderboard; the CSV has these columns, in this order."""

    rank: int | None
    """1 for the best comparable row (pass rate, then cost per passed task); None when not comparable."""
    comparable: bool
    """The row ran the leaderboard's reference task set."""
    run_id: str
    label: str | None
    model: str | None
    layout: str | None
    cache_mode: str | None
    policy: str | None
    """"replay" when the tool calls were replayed, "model" otherwise."""
    tries: int
    max_output_tokens: int | None
    suite: str | None
    """The suite's name (a benchmark as `kind:name`)."""
    task_set: str
    """sha256 (first 12 hex digits) of the sorted names of the tasks the run ran."""
    n_tasks: int
    n_scored: int
    """Tasks in the pass rate's denominator (all but infra errors and unfinished ones)."""
    n_passed: int
    n_unavailable: int
    """Tasks of the suite the run's machine could not run (left out of everything else)."""
    pass_rate: float | None
    pass_rate_ci95_low: float | None
    pass_rate_ci95_high: float | None
    total_cost_usd: float | None
    cost_per_passed_task_usd: float | None
    """None when no task passed or nothing was priced."""
    unpriced_calls: int
    hit_ratio: float | None
    """Σ cache-read tokens / Σ (read + write + fresh) prompt tokens."""
    wall_p50_s: float | None
    """Median task wall time, seconds."""


class Leaderboard(BaseModel):
    schema_version: int = SCHEMA_VERSION
    generated_at: datetime
    ledger: str
    reference_task_set: str | None
    priced_as: str | None = None
    """"priced as <model>" when every cost was re-priced (`--price-as`)."""
    rows: list[LeaderboardRow]


def task_set_digest(names: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(set(names))).encode()).hexdigest()[:12]


def _suite_name(run: RunRecord) -> str | None:
    suite = (run.config.get("settings") or {}).get("suite")
    if not suite:
        return None
    kind, sep, path = str(suite).rpartition(":")
    if not (sep and kind):
        return Path(path).name
    name = Path(path).name
    return kind if name in (kind, f"{kind}.jsonl") else f"{kind}:{name}"


def _row(run: RunRecord, block: Block) -> LeaderboardRow:
    settings = run.config.get("settings") or {}
    low, high = block.pass_rate_ci95 or (None, None)
    return LeaderboardRow(
        rank=None,
        comparable=True,
        run_id=run.id,
        label=run.label,
        model=block.key.model,
        layout=block.key.layout,
        cache_mode=block.key.cache_mode,
        policy=block.key.policy or "model",
        tries=int(settings.get("tries") or block.max_tries or 1),
        max_output_tokens=settings.get("max_output_tokens"),
        suite=_suite_name(run),
        task_set=task_set_digest([t.name for t in block.tasks]),
        n_tasks=block.n_tasks,
        n_scored=block.n_scored,
        n_passed=block.n_passed,
        n_unavailable=len(run.config.get("unavailable") or {}),
        pass_rate=block.pass_rate,
        pass_rate_ci95_low=low,
        pass_rate_ci95_high=high,
        total_cost_usd=block.total_cost_usd,
        cost_per_passed_task_usd=block.cost_per_passed_task_usd,
        unpriced_calls=block.unpriced_calls,
        hit_ratio=block.tokens.hit_ratio,
        wall_p50_s=block.task_wall_s.p50,
    )


def eval_run_ids(ledger: Ledger) -> list[str]:
    """Every eval run in the ledger, oldest first."""
    return [r.id for r in ledger.runs() if r.config.get("kind") == RUN_KIND]


def build_leaderboard(
    ledger: Ledger, run_ids: Sequence[str], *, price_as: str | None = None, price_table: PriceTable | None = None
) -> Leaderboard:
    if not run_ids:
        raise ReportError("name at least one run (or use a ledger that holds eval runs)")
    rows: list[LeaderboardRow] = []
    priced_as = None
    for run_id in dict.fromkeys(run_ids):
        report = build_report(ledger, [run_id], price_as=price_as, price_table=price_table)
        priced_as = report.price_label
        run = ledger.get_run(run_id)
        rows.extend(_row(run, block) for block in report.blocks if block.n_tasks)
    sets = Counter(r.task_set for r in rows)
    reference = None
    if rows:
        top = max(sets.values())
        reference = next(r.task_set for r in rows if sets[r.task_set] == top)
    for row in rows:
        row.comparable = row.task_set == reference

    def order(row: LeaderboardRow) -> tuple:
        cost = row.cost_per_passed_task_usd
        return (not row.comparable, -(row.pass_rate or 0.0), cost is None, cost or 0.0, row.run_id)

    rows.sort(key=order)
    rank = 0
    for row in rows:
        if row.comparable:
            rank += 1
            row.rank = rank
    return Leaderboard(generated_at=utc_now(), ledger=str(ledger.path), reference_task_set=reference, priced_as=priced_as, rows=rows)


def load_leaderboard(
    db: str | Path | None, run_ids: Sequence[str] | None, *, price_as: str | None = None, price_table: PriceTable | None = None
) -> Leaderboard:
    """The leaderboard of `run_ids`, or of every eval run in the ledger when none is named."""
    with Ledger(db, read_only=True) as ledger:
        ids = list(run_ids) if run_ids else eval_run_ids(ledger)
        return build_leaderboard(ledger, ids, price_as=price_as, price_table=price_table)


def to_csv(board: Leaderboard) -> str:
    fields = list(LeaderboardRow.model_fields)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in board.rows:
        writer.writerow({k: _csv_cell(v) for k, v in row.model_dump(mode="json").items()})
    return buf.getvalue()


def _csv_cell(value: object) -> object:
    # Empty for "none", lower-case booleans: what spreadsheet and dataframe readers expect.
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


#: From this many columns the leaderboard has a column per field; narrower, what names a row
#: (model, layout, cache, policy, tries, suite, run) shares one column, three lines a row.
WIDE_FROM = 150


def leaderboard_table(board: Leaderboard, width: int = WIDE_FROM):  # -> rich Group
    """The leaderboard as a rich table, with what makes a row not comparable said under it."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from hitrate.evals.report import _short_model
    from hitrate.harness.commands.format import money
    from hitrate.harness.commands.sessions import short_id_length
    from hitrate.harness.terminal_text import visible

    title = "leaderboard" + (f"; costs {board.priced_as}" if board.priced_as else "")
    wide = width >= WIDE_FROM
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", leading=0 if wide else 1)
    names = ("model", "layout", "cache", "policy", "tries", "suite") if wide else ("run",)
    figures = (("tasks", "pass rate [95% CI]", "$ / passed", "Σ-hit", "wall p50") if wide
               else ("tasks", "pass rate\n[95% CI]", "$ /\npassed", "Σ-hit", "wall\np50"))
    table.add_column("#", justify="right", no_wrap=True)
    for name in names:
        table.add_column(name, justify="right" if name == "tries" else "left", no_wrap=wide, overflow="fold")
    for name in figures:
        table.add_column(name, justify="right", no_wrap=True)
    if wide:
        table.add_column("run", no_wrap=True)
    # Run ids as `hitrate ledger` shortens them: the prefix `report` and `whatif` take.
    id_length = short_id_length([row.run_id for row in board.rows])
    for row in board.rows:
        rate = "-"
        if row.pass_rate is not None:
            rate = f"{_percent(row.pass_rate)} [{(row.pass_rate_ci95_low or 0) * 100:.0f}–{(row.pass_rate_ci95_high or 0) * 100:.0f}]"
        cost = money(row.cost_per_passed_task_usd) if row.n_passed else "- (none passed)"
        if row.cost_per_passed_task_usd is None and row.n_passed and row.unpriced_calls:
            cost = "unpriced"
        # Model names, suite names and run ids come from users and models: shown as typed (a `[/]`
        # is not markup) with control characters visible.
        naming = [_short_model(row.model) or "?", row.layout or "?", row.cache_mode or "?", row.policy or "model",
                  str(row.tries), row.suite or "?"]
        tasks = f"{row.n_passed}/{row.n_scored}" + (f" (+{row.n_unavailable} n/a)" if row.n_unavailable else "")
        wall = "-" if row.wall_p50_s is None else f"{row.wall_p50_s:.2f}s"
        rank = str(row.rank) if row.rank is not None else "≠"
        run = row.run_id if len(row.run_id) <= id_length + 2 else row.run_id[:id_length]
        if wide:
            cells = [rank, *naming, tasks, rate, cost, _percent(row.hit_ratio), wall, run]
        else:
            tries = f"{row.tries} tr{'y' if row.tries == 1 else 'ies'}"
            about = f"{naming[0]}\n{naming[1]} · {naming[2]} · {naming[3]} · {tries}\n{naming[5]} · {run}"
            cells = [rank, about, tasks, rate, cost, _percent(row.hit_ratio), wall]
        table.add_row(*(Text(visible(cell)) for cell in cells))
    notes = []
    others = [r for r in board.rows if not r.comparable]
    if others:
        notes.append(
            f"≠ not comparable: ran another task set than the reference ({board.reference_task_set}): "
            + ", ".join(f"{r.run_id if len(r.run_id) <= id_length + 2 else r.run_id[:id_length]} ({r.suite}, {r.n_tasks} tasks, set {r.task_set})" for r in others)
        )
    if any(r.policy == "replay" for r in board.rows):
        notes.append("replay rows measure the replayed tool-call sequence, not the model.")
    if any(r.n_unavailable for r in board.rows):
        notes.append("n/a: tasks of the suite the run's machine could not run (a missing toolchain or container runtime).")
    return Group(table, *(Text(visible(n)) for n in notes))
