"""`hitrate report`: pass rate, cost per passed task and cache behaviour of one or more eval runs."""

from __future__ import annotations

import io
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional, TypeVar

import typer

from hitrate.harness.cli import add_command

# Reports, jinja2 and matplotlib load when the command runs, not for `hitrate --help`.
if TYPE_CHECKING:
    from rich.console import Console

    from hitrate.evals.report import Report

FORMATS = ("table", "json", "html")
LEADERBOARD_FORMATS = ("table", "json", "csv")
T = TypeVar("T")


def register(app: typer.Typer) -> None:
    add_command(app, "report", report_command)


def report_command(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Run id(s), whole or their first characters as `hitrate ledger` prints them. Several runs (e.g. cold and warm, or both layouts) are reported side by side. With --leaderboard, none means every eval run in the ledger.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or html; with --leaderboard: table, json or csv.")] = "table",
    leaderboard: Annotated[bool, typer.Option("--leaderboard", help="One row per run: pass rate and interval, cost per passed task, Σ-hit, p50 wall time; runs on other task sets marked not comparable (schema: docs/leaderboard.md).")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the report to this file instead of the terminal.")] = None,
    pictures: Annotated[
        Optional[Path], typer.Option("--pictures", help="Also write the pictures into this folder, as PNG and SVG.")
    ] = None,
    task: Annotated[Optional[str], typer.Option("--task", help="Task (name or id) whose calls the per-call picture shows.")] = None,
    png: Annotated[bool, typer.Option("--png", help="HTML: embed the pictures as PNG instead of inline SVG.")] = False,
    price_as: Annotated[
        Optional[str],
        typer.Option(
            "--price-as",
            metavar="MODEL",
            help="Re-price every call's recorded tokens at this model's rates (e.g. claude-sonnet-5), for runs "
            "without prices such as the local engine. Labelled 'priced as MODEL' everywhere; the ledger is not changed.",
        ),
    ] = None,
    db: Annotated[Optional[Path], typer.Option("--db", help="Ledger file (default: $HITRATE_DB or the user data directory).")] = None,
    prices: Annotated[
        Optional[Path],
        typer.Option("--prices", help="Price file for --price-as (hitrate snapshot or LiteLLM JSON; default: $HITRATE_PRICES, "
                     "the config file's `prices`, else the shipped prices). Without --price-as the ledger's own costs are shown."),
    ] = None,
) -> None:
    """Report eval runs: pass rate, cost per passed task, tokens, cache hits and misses.

    Tasks, pass rate with a 95% Wilson interval, total cost, cost per task and per passed task,
    tokens per bucket, hit ratio and share of calls with a hit, miss reasons, task wall time and
    TTFT at p50 / p90 — one block per model, layout and cache mode; pass@1 and pass@2 apart for
    runs with --tries 2."""
    from rich.console import Console

    from hitrate.evals.report import load_report
    from hitrate.harness.cli import require_extra

    console = Console(stderr=True)
    if leaderboard:
        _leaderboard(console, run_ids or [], fmt, out, db, price_as, prices)
        return
    if not run_ids:
        _fail(console, "name at least one run id (or use --leaderboard for every eval run)")
    if fmt == "html" or pictures is not None:
        require_extra("evals", "the report's pictures (--format html, --pictures)")
    if fmt not in FORMATS:
        _fail(console, f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    run_ids = _whole_run_ids(console, db, run_ids)
    report = _load(console, db, prices, price_as, lambda table: load_report(db, run_ids, trajectory_task=task, price_as=price_as, price_table=table))
    _emit(console, render(report, fmt, picture_format="png" if png else "svg"), out, "report")
    if pictures is not None:
        for path in write_pictures(report, pictures):
            console.print(f"picture written to {path}", highlight=False)


def _leaderboard(
    console: Console, run_ids: list[str], fmt: str, out: Path | None, db: Path | None, price_as: str | None, prices: Path | None
) -> None:
    from hitrate.evals.leaderboard import leaderboard_table, load_leaderboard, to_csv
    from hitrate.harness.commands.format import table_width

    if fmt not in LEADERBOARD_FORMATS:
        _fail(console, f"--leaderboard --format must be one of {', '.join(LEADERBOARD_FORMATS)}, not {fmt!r}")
    run_ids = _whole_run_ids(console, db, run_ids)
    board = _load(console, db, prices, price_as, lambda table: load_leaderboard(db, run_ids, price_as=price_as, price_table=table))
    if fmt == "json":
        text = board.model_dump_json(indent=1) + "\n"
    elif fmt == "csv":
        text = to_csv(board)
    else:
        from rich.console import Console as TextConsole

        buf = io.StringIO()
        width = table_width()
        TextConsole(file=buf, width=width, force_terminal=False, color_system=None).print(leaderboard_table(board, width))
        text = "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"
    _emit(console, text, out, "leaderboard")


def _whole_run_ids(console: Console, db: Path | None, run_ids: list[str]) -> list[str]:
    """Each run id as recorded, given whole or by the first characters `hitrate ledger` prints."""
    from hitrate.harness.commands.sessions import SessionLookupError, resolve_recorded_id
    from hitrate.store.ledger import Ledger

    if not run_ids:
        return run_ids
    if db is not None and not db.exists():
        _fail(console, f"ledger file {db} does not exist")
    try:
        with Ledger(db, read_only=True) as ledger:
            return [resolve_recorded_id(ledger, run_id, ("run",)) for run_id in run_ids]
    except SessionLookupError as exc:
        _fail(console, str(exc))


def _load(console: Console, db: Path | None, prices: Path | None, price_as: str | None, load: Callable[[Any], T]) -> T:
    """`load(price table)` from the ledger `db`; a missing ledger, an unknown run or a bad price
    file ends the command with its message."""
    from hitrate.evals.report import ReportError
    from hitrate.harness.price_source import PriceSourceError, price_table

    if db is not None and not db.exists():
        _fail(console, f"ledger file {db} does not exist")
    try:
        return load(price_table(prices) if price_as is not None else None)
    except (ReportError, PriceSourceError) as exc:
        _fail(console, str(exc))


def _emit(console: Console, text: str, out: Path | None, what: str) -> None:
    """`text` on standard output, or into `out` (its folder made) with a line saying so."""
    if out is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"{what} written to {out}", highlight=False)


def render(report: Report, fmt: str, *, picture_format: str = "svg", width: int | None = None) -> str:
    """The report as text: `table` at `width` columns (default: the terminal's, `COLUMNS`, or 80
    for a pipe), `json`, or `html`."""
    from rich.console import Console

    from hitrate.evals.report_render import html, tables
    from hitrate.harness.commands.format import table_width

    if fmt == "json":
        return report.model_dump_json(indent=1) + "\n"
    if fmt == "html":
        return html(report, picture_format=picture_format)
    buf = io.StringIO()
    Console(file=buf, width=width or table_width(), force_terminal=False, color_system=None).print(tables(report))
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


def write_pictures(report: Report, folder: Path) -> list[Path]:
    from hitrate.evals.plots import report_figures, save

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, _, fig in report_figures(report):
        for suffix in ("png", "svg"):
            path = folder / f"{stem}.{suffix}"
            save(fig, str(path))
            written.append(path)
    return written


def _fail(console: Console, message: str) -> NoReturn:
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)
