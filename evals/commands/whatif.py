"""`hitrate whatif`: a recorded run (or session, or task) replayed through other providers' caches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer

from hitrate.harness.cli import add_command

# The simulators, the ledger and rich load when the command runs, not for `hitrate --help`.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from hitrate.evals.whatif.compare import LoadedRequests, WhatIfResult
    from hitrate.store.cost import UsageTotals


def register(app: typer.Typer) -> None:
    add_command(app, "whatif", whatif_command)


def whatif_command(
    ident: Annotated[str, typer.Argument(help="Run, session or task id (or the start of one, as `hitrate ledger` prints it) whose recorded requests to replay.")],
    targets: Annotated[
        list[str],
        typer.Option(
            "--as",
            help="anthropic/<model>, openai/<model>, deepseek/<model>, gemini/<model>, local, or a short name "
            "`run --model` takes (sonnet, gpt, …). Repeat to compare several.",
        ),
    ],
    ttl: Annotated[str, typer.Option("--ttl", help="Anthropic: TTL of the planned marks, 5m or 1h (recorded marks keep theirs).")] = "5m",
    marks: Annotated[str, typer.Option("--marks", help="Anthropic / OpenAI >= 5.6 cache marks: auto (default: the marks the "
                                       "requests carried, as `hitrate demo` compares; planned when they came from a backend that takes "
                                       "none), planned (where hitrate's projection would place them) or recorded.")] = "auto",
    naive: Annotated[bool, typer.Option("--naive", help="Replay the content assembled naively: volatile head, no marks.")] = False,
    volatility: Annotated[str, typer.Option("--volatility", help="With --naive: the head changes per 'context' change or per 'request'.")] = "context",
    retention: Annotated[str, typer.Option("--retention", help="OpenAI <= 5.5: in_memory or 24h.")] = "in_memory",
    idle_s: Annotated[Optional[float], typer.Option("--idle-s", help="OpenAI <= 5.5 / Gemini: idle expiry in seconds.")] = None,
    pool_tokens: Annotated[int, typer.Option("--pool-tokens", help="Local: KV pool size in tokens.")] = 1_000_000,
    page_size: Annotated[int, typer.Option("--page-size", help="Local: tokens per KV page.")] = 1,
    calibrate: Annotated[bool, typer.Option("--calibrate/--no-calibrate", help="Scale token estimates to the reported prompts.")] = True,
    per_call: Annotated[bool, typer.Option("--per-call", help="Also list every request's predicted and actual buckets.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    db: Annotated[Optional[Path], typer.Option("--db", help="Ledger file (default: $HITRATE_DB or the user data directory).")] = None,
    prices: Annotated[Optional[Path], typer.Option("--prices", help="Price file (hitrate snapshot or LiteLLM JSON; default: $HITRATE_PRICES, the config file, the shipped prices).")] = None,
    policies: Annotated[bool, typer.Option("--policies", help="Replay SESSION under each context policy (none, naive summary, "
                                           "cache-aware, clearing, provider-native) for each --as anthropic/openai target.")] = False,
    context_window: Annotated[Optional[int], typer.Option("--context-window", min=1, help="With --policies: the window to keep "
                                                          "inside (default: the targets' smallest).")] = None,
    compact_at: Annotated[float, typer.Option("--compact-at", min=0.05, max=1.0, help="With --policies: compact past this share of the window.")] = 0.8,
) -> None:
    """Replay recorded requests through another provider's caching rules and prices.

    Prints the predicted buckets (fresh, writes per TTL, read, output) and cost next to the ones
    the requests really had. Anthropic: breakpoints, ~20-position lookback, TTL from request
    start. OpenAI <= 5.5: automatic prefix, 1024 minimum, 128-token steps. OpenAI >= 5.6: exact
    breakpoints. DeepSeek: prefix units. local: the engine's radix cache."""
    from hitrate.evals.whatif.compare import WhatIfError, WhatIfOptions, load_requests, parse_target, resolved_marks, whatif
    from hitrate.harness.commands.sessions import resolve_recorded_id
    from hitrate.harness.commands.format import console as make_console
    from hitrate.harness.price_source import PriceSourceError, price_table
    from hitrate.store.ledger import Ledger

    console = make_console()
    try:
        options = WhatIfOptions(
            ttl=ttl,  # type: ignore[arg-type]
            marks=marks,  # type: ignore[arg-type]
            naive=naive,
            volatility=volatility,  # type: ignore[arg-type]
            retention=retention,  # type: ignore[arg-type]
            idle_s=idle_s,
            pool_tokens=pool_tokens,
            page_size=page_size,
            calibrate=calibrate,
        )
    except ValueError as exc:
        _fail(console, f"bad option: {_first_error(exc)}")
    try:
        table = price_table(prices)
    except PriceSourceError as exc:
        _fail(console, str(exc))
    if policies:
        _policies(console, ident, targets, db, table, context_window, compact_at, as_json)
        return
    try:
        parsed = [parse_target(short_target(t), table) for t in targets]
        with Ledger(db, read_only=True) as ledger:
            # The shortened ids `hitrate ledger` prints are enough, as for `run --resume`.
            loaded = load_requests(ledger, resolve_recorded_id(ledger, ident))
        results = [whatif(loaded.requests, target, options, table) for target in parsed]
    except (WhatIfError, ValueError) as exc:
        _fail(console, str(exc))
    if as_json:
        typer.echo(json.dumps({"scope": loaded.scope, "skipped": loaded.skipped, "results": [r.model_dump(mode="json") for r in results]}, indent=1))
        return
    console.print(summary_table(loaded, results))
    console.print("Σ-hit ratio: Σread / Σ(read + write + fresh); any-hit calls: share of calls that read from cache.",
                  style="dim")
    if any(r.target.split("/", 1)[0] in ("anthropic", "openai") for r in results):
        used = resolved_marks(loaded.requests, options)
        which = ("marks as hitrate's projection would place them (--marks recorded: the marks the requests carried)"
                 if used == "planned" else "the marks the requests carried (--marks planned: hitrate's own)")
        console.print(f"  note: cache marks: {which}", highlight=False)
    for note in loaded.skipped + sorted({n for r in results for n in r.notes}):
        console.print(f"  note: {note}", highlight=False)
    if per_call:
        for result in results:
            console.print(per_call_table(result))


def _policies(console: Console, ident: str, targets: list[str], db: Path | None, table, window: int | None,
              threshold: float, as_json: bool) -> None:
    from hitrate.evals.whatif.policy_report import policy_table, session_policies
    from hitrate.store.ledger import Ledger

    from hitrate.harness.commands.sessions import resolve_session

    try:
        with Ledger(db) as ledger:
            session = resolve_session(ledger, ident)
            used, results = session_policies(ledger, session, [short_target(t) for t in targets], window=window,
                                             threshold=threshold, table=table)
    except ValueError as exc:
        _fail(console, str(exc))
    if as_json:
        typer.echo(json.dumps({"session": session, "context_window": used, "results": [r.model_dump(mode="json") for r in results]}, indent=1))
        return
    console.print(policy_table(results, used))
    console.print("summ. read: the summary calls' cache-read share; native compaction bills its iteration as uncached input.",
                  style="dim")


def short_target(target: str) -> str:
    """A short model name `run --model` takes ("sonnet") as the spec it stands for."""
    from hitrate.harness.models import MODEL_ALIASES

    return MODEL_ALIASES.get(target.strip().lower(), target)


def summary_table(loaded: LoadedRequests, results: list[WhatIfResult]) -> Table:
    """One column per replay, next to the actual column; one row per bucket and figure. Headers
    wrap at `/` and spaces, never inside a word, so several targets fit 80 columns."""
    from rich import box
    from rich.table import Table

    from hitrate.evals.buckets import token_columns

    out = Table(title=f"what-if: {loaded.scope} ({len(loaded.requests)} requests)", title_justify="left",
                box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))  # fmt: skip
    out.add_column("", no_wrap=True)
    # A local model is recorded by its path; its folder name is what identifies it.
    models = sorted({r.model.rstrip("/").rsplit("/", 1)[-1] for r in loaded.requests})
    # Headers on two lines (provider / model) so that several targets fit 80 columns without a
    # header broken inside a word.
    headers = ["actual\n" + ", ".join(models)]
    headers += [result.target.replace("/", "/\n", 1) + (" naive" if result.options.naive else "") for result in results]
    for header in headers:
        out.add_column(header, justify="right", overflow="fold")
    totals = [results[0].actual, *(r.predicted for r in results)]
    buckets = token_columns(totals)
    columns = [_total_cells(t, buckets) for t in totals]
    labels = ["calls", *(label for label, _ in buckets), "Σ-hit ratio", "any-hit calls", "cost"]
    for i, label in enumerate(labels):
        out.add_row(label, *(column[i] for column in columns))
    return out


def per_call_table(result: WhatIfResult) -> Table:
    from rich.table import Table

    from hitrate.harness.commands.format import money

    out = Table(title=f"per request: {result.target}")
    out.add_column("#", justify="right")
    out.add_column("t+s", justify="right")
    out.add_column("predicted read / write / fresh", justify="right")
    out.add_column("actual read / write / fresh", justify="right")
    out.add_column("predicted cost", justify="right")
    out.add_column("why")
    start = result.calls[0].started_at if result.calls else None
    for i, call in enumerate(result.calls):
        actual = call.actual
        out.add_row(
            str(i),
            f"{(call.started_at - start).total_seconds():.0f}" if start else "",
            _triple(call.predicted.cache_read, call.predicted.cache_write_total, call.predicted.fresh_input),
            _triple(actual.cache_read, actual.cache_write_total, actual.fresh_input) if actual else "-",
            money(call.predicted_cost_usd),
            call.note,
        )
    return out


def _total_cells(totals: UsageTotals, buckets: list[tuple[str, str]]) -> list[str]:
    from hitrate.harness.commands.format import money

    cells = [str(totals.calls)]
    for _, bucket in buckets:
        value = getattr(totals, bucket)
        unknown = totals.unknown.get(bucket, 0)
        cells.append(f"{value:,}" + (f" (+{unknown} unknown)" if unknown else ""))
    cells.append("-" if totals.hit_ratio is None else f"{totals.hit_ratio:.1%}")
    cells.append("-" if totals.calls_with_hit_share is None else f"{totals.calls_with_hit_share:.0%}")
    cost = money(totals.cost_usd)
    if totals.cost_usd is not None and totals.unpriced_calls:
        cost += f" (+{totals.unpriced_calls} unpriced)"
    cells.append(cost)
    return cells


def _triple(read: int | None, write: int | None, fresh: int | None) -> str:
    return " / ".join("?" if v is None else f"{v:,}" for v in (read, write, fresh))


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
    return str(exc)


def _fail(console: Console, message: str) -> NoReturn:
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(message)}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(2)
