"""A `Report` as terminal tables, JSON, or a self-contained HTML page with its pictures inline."""

from __future__ import annotations

import base64
from importlib import resources

import jinja2
from rich.console import Group
from rich.table import Table

from hitrate.evals.pass_at import PassAtK
from hitrate.evals.plots import report_figures, to_png, to_svg
from hitrate.evals.buckets import token_columns
from hitrate.evals.report import Block, Report

TEMPLATE = "report.html.j2"


def money(value: float | None) -> str:
    """Dollars, or "unknown price": an unpriced cost is never shown as $0."""
    if value is None:
        return "unknown price"
    if value == 0:
        return "$0"
    return f"${value:,.4f}" if abs(value) < 100 else f"${value:,.2f}"


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


def tables(report: Report) -> Group:
    """The report as rich tables: one row per configuration block, never a merged total."""
    runs = ", ".join(f"{r.id}" + (f" ({r.label})" if r.label else "") for r in report.runs)
    priced = f" — costs {report.price_label}" if report.price_label else ""
    summary = Table(title=f"eval report: {runs}{priced}", title_justify="left", caption=pricing_note(report), caption_justify="left")
    for column, justify in (
        ("model · layout · cache", "left"), ("tasks", "right"), ("passed", "right"), ("pass rate [95% CI]", "right"),
        ("total cost", "right"), ("cost / task", "right"), ("cost / passed task", "right"), ("hit ratio", "right"),
        ("calls w/ hit", "right"), ("wall p50 / p90", "right"), ("TTFT p50 / p90", "right"),
    ):
        # A narrow terminal folds the configuration label rather than cutting it: a row is read by it.
        overflow = "fold" if column == "model · layout · cache" else "ellipsis"
        summary.add_column(column, justify=justify, overflow=overflow)  # type: ignore[arg-type]
    for b in report.blocks:
        excluded = b.n_tasks - b.n_scored
        summary.add_row(
            b.key.label,
            str(b.n_tasks) + (f" ({excluded} not scored)" if excluded else ""),
            f"{b.n_passed}/{b.n_scored}",
            pass_rate_text(b),
            cost_text(b, b.total_cost_usd),
            money(b.cost_per_task_usd),
            money(b.cost_per_passed_task_usd) if b.n_passed else "- (none passed)",
            percent(b.tokens.hit_ratio),
            percent(b.tokens.calls_with_hit_share, 0),
            f"{seconds(b.task_wall_s.p50)} / {seconds(b.task_wall_s.p90)}",
            f"{seconds(b.ttft_s.p50)} / {seconds(b.ttft_s.p90)}",
        )

    outcomes = Table(title="outcomes (infra errors and unfinished tasks are left out of the pass rate)", title_justify="left")
    outcomes.add_column("configuration")
    names = sorted({o for b in report.blocks for o in b.outcomes}, key=_outcome_order)
    for name in names:
        outcomes.add_column(name, justify="right")
    for b in report.blocks:
        outcomes.add_row(b.key.label, *(str(b.outcomes.get(n, 0)) for n in names))

    buckets = Table(title="tokens per bucket", title_justify="left")
    buckets.add_column("configuration")
    columns = token_columns([b.tokens for b in report.blocks])
    for label in ("calls", *(label for label, _ in columns)):
        buckets.add_column(label, justify="right")
    for b in report.blocks:
        buckets.add_row(b.key.label, str(b.tokens.calls), *(tokens_text(b, k) for _, k in columns))

    extra = []
    ks = pass_at_ks(report)
    if ks:
        title = "pass@k: tasks passed within their first k tries (the second try sees the failing test output once)"
        pass_at = Table(title=title, title_justify="left")
        pass_at.add_column("configuration")
        pass_at.add_column("tries", justify="right")
        for k in ks:
            pass_at.add_column(f"pass@{k} [95% CI]", justify="right")
        for b in report.blocks:
            note = f" ({b.pass_try_unknown} passing try unknown)" if b.pass_try_unknown else ""
            pass_at.add_row(b.key.label, str(b.max_tries) + note, *(pass_at_text(pass_at_row(b, k)) for k in ks))
        extra.append(pass_at)

    misses = Table(title="miss reasons" + (f" (costs {report.price_label})" if report.price_label else ""), title_justify="left")
    for column in ("configuration", "reason", "calls", "tokens", "cost", "e.g."):
        misses.add_column(column, justify="right" if column in ("calls", "tokens", "cost") else "left")
    for b in report.blocks:
        for row in b.miss_reasons:
            misses.add_row(b.key.label, row.reason, str(row.calls), f"{row.tokens:,}", money(row.cost_usd), "; ".join(row.examples))
    return Group(summary, *extra, outcomes, buckets, misses)


def _outcome_order(name: str) -> tuple[int, str]:
    order = ("pass", "fail", "agent_error", "timeout", "infra_error", "unfinished")
    return (order.index(name) if name in order else len(order), name)


def html(report: Report, *, picture_format: str = "svg") -> str:
    """A single HTML file: the tables, and both pictures inline (SVG, or PNG as base64)."""
    if picture_format not in ("svg", "png"):
        raise ValueError("picture_format must be svg or png")
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
    )
