"""A `Report` as terminal tables, JSON, or a self-contained HTML page with its pictures inline."""

from __future__ import annotations

import base64
from importlib import resources
from typing import Any

import jinja2
from rich import box
from rich.console import Group
from rich.table import Table

from hitrate.evals.buckets import token_columns
from hitrate.evals.pass_at import PassAtK
from hitrate.evals.report import Block, Report, headline
from hitrate.harness.commands.format import money

TEMPLATE = "report.html.j2"


def percent(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def pass_rate_text(block: Block) -> str:
    if block.pass_rate is None:
        return "-"
    low, high = block.pass_rate_ci95 or (block.pass_rate, block.pass_rate)
    return f"{block.pass_rate * 100:.1f}% [{low * 100:.0f}–{high * 100:.0f}]"


def tokens_text(block: Block, bucket: str) -> str:
    value = getattr(block.tokens, bucket)
    unknown = block.tokens.unknown.get(bucket, 0)
    return f"{value:,}" + (f" (+{unknown} calls unknown)" if unknown else "")


def pass_at_text(row: PassAtK | None) -> str:
    if row is None or row.rate is None:
        return "-"
    low, high = row.ci95 or (row.rate, row.rate)
    return f"{row.n_passed} · {row.rate * 100:.1f}% [{low * 100:.0f}–{high * 100:.0f}]"


def pass_at_ks(report: Report) -> list[int]:
    """The k of every pass@k any block reports (1, 2 with `--tries 2`); empty for single tries."""
    return sorted({row.k for b in report.blocks for row in b.pass_at})


def pass_at_row(block: Block, k: int) -> PassAtK | None:
    return next((row for row in block.pass_at if row.k == k), None)


def pricing_note(report: Report) -> str | None:
    """What `--price-as` did, in one sentence, or None when the costs are the ledger's."""
    info = report.priced_as
    if info is None:
        return None
    asked = f" (asked for {info.requested})" if info.requested != info.model else ""
    note = (
        f"Costs priced as {info.model}{asked}: every call's recorded token buckets re-priced at its rates "
        f"(price snapshot {info.price_snapshot_id}); the ledger keeps its own costs."
    )
    if info.unpriced_calls:
        note += f" {info.unpriced_calls} call(s) stayed unpriced: {'; '.join(info.unpriced_reasons)}."
    return note


def cost_text(block: Block, value: float | None) -> str:
    text = money(value)
    if value is not None and block.unpriced_calls:
        text += f" (+{block.unpriced_calls} unpriced calls)"
    return text


REPLAY_NOTE = (
    "replay: the tool calls were replayed from a recorded sequence (`--policy replay`), so the pass "
    "rate measures that sequence, not the model; the cache figures are what the backend really did."
)
FIGURE_NOTES = (
    "Σ-hit ratio: of all prompt tokens, the share read from cache (Σread / Σ(read + write + fresh)). "
    "any-hit calls: calls that read at least one token from cache. calls with a miss: calls "
    "that read less than they could have (a task's first call is `cold`); a call can read a little "
    "and still miss, as the naive layout's do. Misses by reason are listed below."
)


def tables(report: Report) -> Group:
    """The report as rich tables that read at 80 columns: one column per configuration block
    (never a merged total), one row per figure."""
    from rich.text import Text

    from hitrate.harness.terminal_text import visible

    def plain(text: str) -> Text:
        # Labels, model names, task outcomes and miss reasons come from users and models: shown as
        # typed (a `[/]` is not markup) with control characters visible.
        return Text(visible(text))

    runs = ", ".join(f"{r.id}" + (f" ({r.label})" if r.label else "") for r in report.runs)
    priced = f"; costs {report.price_label}" if report.price_label else ""
    heading = Text(visible(f"eval report: {runs}{priced}"), style="bold")
    lead = headline(report.blocks)
    if lead:
        heading.append(f"\n{lead}")
    models = {b.key.model for b in report.blocks}
    shared_model = next(iter(models)) if len(models) == 1 else None

    summary = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    summary.add_column("", no_wrap=True)

    def label_of(b: Block) -> str:
        # With one model for all blocks, it is named once under the table, not in every header.
        return b.key.label.split(" · ", 1)[-1] if shared_model is not None and b.key.model else b.key.label

    for b in report.blocks:
        summary.add_column(plain(label_of(b)), justify="right", overflow="fold")
    outcome_names = sorted({o for b in report.blocks for o in b.outcomes}, key=_outcome_order)
    columns = token_columns([b.tokens for b in report.blocks])

    def row(label: str, cells: list[str], *, end_section: bool = False) -> None:
        summary.add_row(plain(label), *map(plain, cells), end_section=end_section)

    blocks = report.blocks
    row("tasks", [str(b.n_tasks) + (f" ({b.n_tasks - b.n_scored} not scored)" if b.n_tasks > b.n_scored else "") for b in blocks])
    for name in outcome_names:
        row(f"  {name}", [str(b.outcomes.get(name, 0)) for b in blocks])
    row("passed / scored", [f"{b.n_passed}/{b.n_scored}" for b in blocks])
    row("pass rate [95% CI]", [pass_rate_text(b) + (" replay" if b.key.policy == "replay" else "") for b in blocks])
    ks = pass_at_ks(report)
    if ks:
        # pass@k: tasks passed within their first k tries (the second sees the failing output once).
        row("tries", [str(b.max_tries) + (f" ({b.pass_try_unknown} passing try unknown)" if b.pass_try_unknown else "")
                      for b in blocks])  # fmt: skip
    for k in ks:
        row(f"pass@{k} [95% CI]", [pass_at_text(pass_at_row(b, k)) for b in blocks])
    row("total cost", [cost_text(b, b.total_cost_usd) for b in blocks])
    row("cost / task", [money(b.cost_per_task_usd) for b in blocks])
    row("cost / passed task", [money(b.cost_per_passed_task_usd) if b.n_passed else "- (none passed)" for b in blocks],
        end_section=True)
    row("calls", [str(b.tokens.calls) for b in blocks])
    for label, bucket in columns:
        row(f"  {label}", [tokens_text(b, bucket) for b in blocks])
    row("Σ-hit ratio", [percent(b.tokens.hit_ratio) for b in blocks])
    row("any-hit calls", [_share(b.tokens.calls_with_hit_share, _calls_with_known_read(b), b.tokens.calls) for b in blocks])
    row("calls with a miss", [_share(_miss_share(b), b.tokens.calls) for b in blocks], end_section=True)
    row("task wall p50 / p90", [f"{seconds(b.task_wall_s.p50)} / {seconds(b.task_wall_s.p90)}" for b in blocks])
    row("TTFT p50 / p90", [f"{seconds(b.ttft_s.p50)} / {seconds(b.ttft_s.p90)}" for b in blocks])

    notes: list[Text] = []
    if shared_model:
        notes.append(plain(f"model: {blocks[0].key.label.split(' · ', 1)[0]}"))
    note = pricing_note(report)
    if note:
        notes.append(Text(note))
    if any(b.key.policy == "replay" for b in blocks):
        notes.append(Text(REPLAY_NOTE))
    if ks:
        notes.append(Text("pass@k: tasks passed within their first k tries (the second try sees the failing test "
                          "output once).", style="dim"))
    notes.append(Text(FIGURE_NOTES, style="dim"))
    if any(b.n_tasks > b.n_scored for b in blocks):
        notes.append(Text("not scored: infra errors and unfinished tasks, left out of the pass rate.", style="dim"))

    misses = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for column in ("miss reason", "calls", "tokens", "cost", "e.g."):
        justify = "right" if column in ("calls", "tokens", "cost") else "left"
        misses.add_column(column, justify=justify, no_wrap=column != "e.g.", overflow="fold")  # type: ignore[arg-type]
    for b in blocks:
        misses.add_row(Text(visible(label_of(b)), style="bold"), "", "", "", "")
        if not b.miss_reasons:
            misses.add_row("  (no misses)", "", "", "", "")
        for r in b.miss_reasons:
            misses.add_row(*map(plain, (f"  {r.reason}", str(r.calls), f"{r.tokens:,}", money(r.cost_usd), "; ".join(r.examples))))
    miss_title = Text("calls with a miss, by reason" + (f" (costs {report.price_label})" if report.price_label else ""), style="bold")
    miss_note = Text("tokens: prompt tokens the misses paid as writes or fresh input; cost: what they cost over a hit.",
                     style="dim")
    ended = _end_reasons(blocks, label_of)
    return Group(heading, summary, *notes, Text(""), miss_title, misses, miss_note, *ended)


def _end_reasons(blocks: list[Block], label_of: Any) -> list[Any]:
    """How the agent's runs ended, per block, and the turns the harness added (none when the runs
    recorded neither)."""
    from rich.text import Text

    from hitrate.harness.terminal_text import visible

    def plain(text: str) -> Text:
        return Text(visible(text))

    if not any(b.end_reasons for b in blocks):
        return []
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("the agent's run ended", overflow="fold")
    table.add_column("tasks", justify="right")
    for b in blocks:
        table.add_row(Text(visible(label_of(b)), style="bold"), "")
        for reason, n in b.end_reasons.items():
            table.add_row(plain(f"  {reason}"), str(n))
        if b.harness_turns:
            added = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in b.harness_turns.items())
            table.add_row(plain(f"  harness turns added: {added}"), "")
    return [Text(""), table]


def _share(share: float | None, calls: int, of_all: int | None = None) -> str:
    """`97% (31/32)`: a share of calls with the counts it comes from; `of_all`: every call, when
    the share is of fewer (`50% (1/2; 1 unknown)`: one call reported no read count)."""
    if share is None or not calls:
        return "-"
    unknown = (of_all or calls) - calls
    return f"{share:.0%} ({round(share * calls)}/{calls}" + (f"; {unknown} unknown)" if unknown else ")")


def _calls_with_known_read(block: Block) -> int:
    """The calls the any-hit share is over: those that reported a cache-read count."""
    return block.tokens.calls - block.tokens.unknown.get("cache_read", 0)


def _miss_share(block: Block) -> float | None:
    calls = block.tokens.calls
    return sum(r.calls for r in block.miss_reasons) / calls if calls else None


def _outcome_order(name: str) -> tuple[int, str]:
    order = ("pass", "fail", "agent_error", "timeout", "infra_error", "unfinished")
    return (order.index(name) if name in order else len(order), name)


def html(report: Report, *, picture_format: str = "svg") -> str:
    """A single HTML file: the tables, and both pictures inline (SVG, or PNG as base64)."""
    if picture_format not in ("svg", "png"):
        raise ValueError("picture_format must be svg or png")
    from hitrate.evals.plots import report_figures, to_png, to_svg  # matplotlib: the `evals` extra

    pictures = []
    for _, title, fig in report_figures(report):
        if picture_format == "svg":
            pictures.append({"title": title, "svg": to_svg(fig)})
        else:
            pictures.append({"title": title, "png": base64.b64encode(to_png(fig)).decode("ascii")})
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(money=money, percent=percent, seconds=seconds)
    template = env.from_string(resources.files("hitrate.evals").joinpath(TEMPLATE).read_text(encoding="utf-8"))
    return template.render(
        report=report,
        pictures=pictures,
        pass_rate_text=pass_rate_text,
        tokens_text=tokens_text,
        token_columns=token_columns([b.tokens for b in report.blocks]),
        cost_text=cost_text,
        pricing_note=pricing_note(report),
        pass_at_ks=pass_at_ks(report),
        pass_at_row=pass_at_row,
        pass_at_text=pass_at_text,
        outcome_names=sorted({o for b in report.blocks for o in b.outcomes}, key=_outcome_order),
        headline=headline(report.blocks),
        replay_note=REPLAY_NOTE if any(b.key.policy == "replay" for b in report.blocks) else None,
        figure_notes=FIGURE_NOTES,
        share=_share,
        miss_share=_miss_share,
    )
