"""Report pictures, drawn with matplotlib's object API on the Agg / SVG canvases (no display, no
pyplot global state), written as PNG or SVG.

1. Cost per passed task (log x) against pass rate (y): one point per configuration, with the
   Wilson 95% interval as a vertical bar, and the Pareto frontier (cheaper and better) as a line.
   Configurations that cannot be placed are named in a footnote wrapped inside the figure.
2. One task's calls as horizontal stacked bars (read | write | fresh | output tokens), numbered
   from #1 as the TUI numbers them, each call that missed marked with its miss label (shortened
   when long) at the end of its bar, hits unmarked, and the running cost on a second axis.

When the report's costs are re-priced at another model's rates (`--price-as`), every title and
cost axis says so.
"""

from __future__ import annotations

import functools
import io
import math
import re
import textwrap
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

from hitrate.evals.report import Block, Report, Trajectory, headline

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@functools.cache
def _mpl() -> SimpleNamespace:
    """matplotlib (the `evals` extra), loaded when the first picture is drawn: a plain install
    imports this module and reports everything else without it."""
    import matplotlib

    matplotlib.use("Agg")  # never a GUI backend, even where a display exists
    # Fixed SVG ids and no timestamp: the same report draws the same bytes.
    matplotlib.rcParams["svg.hashsalt"] = "hitrate"
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    return SimpleNamespace(Figure=Figure, FuncFormatter=FuncFormatter, NullFormatter=NullFormatter)


_METADATA_SVG = {"Date": None, "Creator": "hitrate"}
_METADATA_PNG = {"Software": "hitrate"}

BUCKET_COLOURS = {"read": "#2e7d32", "write": "#ef8f00", "fresh": "#c62828", "output": "#1565c0"}
MISS_COLOUR = "#b71c1c"
MISS_MARK = "✗"
"""Written before a missed call's label, as the TUI's cache panel marks misses."""
MISS_LABEL_CHARS = 34
"""Longer miss labels are cut to this many characters (with an ellipsis) so they fit beside the bars."""
_FOOTNOTE_PT = 7.0


TITLE_CHARS = 80
"""Characters of a medium-size title that fit across the 8-inch per-call picture."""


def titled(title: str, price_label: str | None) -> str:
    """A picture title, with " — priced as <model>" when the costs are re-priced."""
    return f"{title} — {price_label}" if price_label else title


def cost_vs_pass_rate(blocks: Sequence[Block], *, price_label: str | None = None) -> Figure:
    """Cost per passed task against pass rate, one point per block; the headline (how much the
    cache-aware layout saves) as the title where the blocks allow one."""
    fig = _mpl().Figure(figsize=(7.0, 4.6), layout="constrained")
    ax = fig.add_subplot()
    plotted = [b for b in blocks if b.cost_per_passed_task_usd is not None and b.pass_rate is not None]
    for b in plotted:
        low, high = b.pass_rate_ci95 or (b.pass_rate, b.pass_rate)
        marker = "o" if b.key.cache_mode != "warm" else "s"
        filled = b.key.layout != "naive"
        ax.errorbar(
            [b.cost_per_passed_task_usd],
            [b.pass_rate * 100],
            yerr=[[(b.pass_rate - low) * 100], [(high - b.pass_rate) * 100]],
            fmt=marker,
            capsize=4,
            markerfacecolor=None if filled else "white",
            label=f"{b.key.label} (n={b.n_scored}" + (f", within {b.max_tries} tries)" if b.max_tries > 1 else ")"),
        )
    frontier = pareto_frontier([(b.cost_per_passed_task_usd, b.pass_rate * 100) for b in plotted])  # type: ignore[misc]
    if len(frontier) > 1:
        xs, ys = zip(*frontier)
        ax.plot(xs, ys, linestyle="--", color="grey", linewidth=1, label="Pareto frontier")
    ax.set_xscale("log")
    _dollar_log_axis(ax, [b.cost_per_passed_task_usd for b in plotted])  # type: ignore[misc]
    ax.set_xlabel(f"cost per passed task (USD, {price_label + ', ' if price_label else ''}log scale)")
    ax.set_ylabel("pass rate (%) with 95% Wilson interval")
    # From a little under the lowest interval to 100, not always 0-100: points that all sit near
    # 100% would otherwise be squeezed against the top edge.
    lows = [(b.pass_rate_ci95 or (b.pass_rate, b.pass_rate))[0] * 100 for b in plotted]  # type: ignore[operator]
    bottom = max(0.0, math.floor((min(lows, default=0.0) - 8) / 10) * 10)
    ax.set_ylim(bottom - 2, 102)
    ax.grid(True, which="both", alpha=0.3)
    skipped = [b.key.label for b in blocks if b not in plotted]
    if plotted:
        ax.legend(fontsize="small", loc="best")
    else:
        hint = "" if price_label else "\nunpriced runs (e.g. the local engine): hitrate report --price-as MODEL"
        ax.text(0.5, 0.5, "no configuration has both a passed task and a known cost" + hint,
                transform=ax.transAxes, ha="center", va="center", fontsize="small", color="#444444")  # fmt: skip
        ax.tick_params(axis="x", which="both", labelbottom=False)  # an empty log axis has no dollars to show
    if skipped:
        why = "no passed task or unknown price"
        footnote(fig, [f"not shown ({why}):", *(f"{label};" for label in skipped[:-1]), skipped[-1]])
    title = titled("Cost per passed task vs pass rate", price_label)
    lead = headline(blocks)
    if lead:
        fig.suptitle(lead, fontsize="large", fontweight="bold")
    ax.set_title(title, fontsize="medium", pad=8)
    return fig


def _dollar_log_axis(ax, costs: Sequence[float]) -> None:
    """Room on both sides of the points (a log axis hugs them by default) and tick labels in
    dollars rather than powers of ten. Minor ticks get labels only when the axis spans less than
    about a decade, where there would otherwise be one major label or none."""
    positive = [c for c in costs if c > 0]
    if not positive:
        return
    low, high = min(positive), max(positive)
    ax.set_xlim(low / 1.6, high * 1.6)
    dollars = _mpl().FuncFormatter(lambda x, _pos: f"${x:,.6g}")
    ax.xaxis.set_major_formatter(dollars)
    if math.log10(high * 1.6 / (low / 1.6)) < 1.3:
        # Less than about a decade: the minor ticks carry the labels too, at the major ticks'
        # size, so the axis reads as one scale.
        ax.xaxis.set_minor_formatter(dollars)
        ax.tick_params(axis="x", which="both", labelsize="small")
    else:
        ax.xaxis.set_minor_formatter(_mpl().NullFormatter())


def wrap_items(items: Sequence[str], width: int) -> list[str]:
    """Lines of at most `width` characters, filled with whole items where they fit (so a
    configuration's label is not split across lines); an item longer than a line is wrapped."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 1 + len(item) <= width:
            lines[-1] += " " + item
        elif len(item) <= width:
            lines.append(item)
        else:
            lines.extend(textwrap.wrap(item, width=width, break_long_words=True, break_on_hyphens=False))
    return lines


def footnote(fig: Figure, items: Sequence[str]) -> None:
    """Small text under the plot, wrapped to the figure's width; the constrained layout makes
    room for it, so it neither leaves the figure nor covers the axes."""
    # Characters per line from the figure width and the font size (an average glyph is about
    # 0.6 em wide in DejaVu Sans), with a margin for wider glyphs.
    width_pt = fig.get_figwidth() * 72
    chars = max(20, int(width_pt / (_FOOTNOTE_PT * 0.6) * 0.9))
    text = "\n".join(wrap_items(items, chars))
    fig.supxlabel(text, fontsize=_FOOTNOTE_PT, x=0.01, ha="left", multialignment="left", color="#444444")


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both cost (lower) and pass rate (higher), by cost."""
    best = -1.0
    out = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return out


def short_label(label: str, limit: int = MISS_LABEL_CHARS) -> str:
    """`label` cut to `limit` characters, the cut marked with an ellipsis."""
    return label if len(label) <= limit else label[: limit - 1].rstrip() + "…"


def longest_call(trajectories: list[Trajectory]) -> int:
    """The most tokens any one call of `trajectories` has: a token scale they can all share."""
    return max((sum(getattr(c, n) or 0 for n in ("read", "write", "fresh", "output")) for t in trajectories for c in t.calls),
               default=0)


def call_bars(trajectory: Trajectory, *, price_label: str | None = None, token_span: int | None = None) -> Figure:
    """One bar per call: read | write | fresh | output tokens; each missed call's label at its
    bar's end, hits unmarked. `token_span`: the token scale to draw on (so that two layouts' pictures
    compare bar for bar); default the longest bar."""
    calls = trajectory.calls
    fig = _mpl().Figure(figsize=(8.0, max(2.5, 0.32 * len(calls) + 1.4)), layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(len(calls)))
    left = [0] * len(calls)
    for name in ("read", "write", "fresh", "output"):
        widths = [getattr(c, name) or 0 for c in calls]
        ax.barh(ys, widths, left=left, color=BUCKET_COLOURS[name], label=name, height=0.7)
        left = [a + b for a, b in zip(left, widths)]
    span = max(token_span or 0, max(left, default=0)) or 1
    ax.set_xlim(0, span * 1.05)
    marks = []
    for y, end, call in zip(ys, left, calls):
        unknown = [n for n in ("read", "write", "fresh", "output") if getattr(call, n) is None]
        parts = []
        if call.miss_reason:
            parts.append(f"{MISS_MARK} {short_label(call.miss_reason)}")
        if unknown:
            parts.append(f"[{', '.join(unknown)} unknown]")
        if parts:
            # Offset in points, not data units: the gap stays the same whatever the token counts.
            mark = ax.annotate(
                " ".join(parts), xy=(end, y), xytext=(4, 0), textcoords="offset points", va="center",
                fontsize="x-small", color=MISS_COLOUR if call.miss_reason else "#444444",
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}, zorder=4,
            )  # fmt: skip
            marks.append((end, mark))
    ax.set_yticks(ys, [f"#{c.number}" for c in calls])
    for tick, call in zip(ax.get_yticklabels(), calls):
        if call.miss_reason:
            tick.set_color(MISS_COLOUR)
    ax.invert_yaxis()
    ax.set_xlabel("tokens")
    handles, labels = ax.get_legend_handles_labels()
    running = []
    total = 0.0
    for call in calls:
        total += call.cost_usd or 0.0
        running.append(total)
    if any(c.cost_usd is not None for c in calls) and running[-1] > 0:
        # Drawn on the token axes, scaled so the whole run's cost lands where the longest bar
        # ends, with a dollar scale on top: one axes keeps the order bars < line < miss labels.
        per_dollar = span / running[-1]
        (line,) = ax.plot([r * per_dollar for r in running], ys, color="#444444", marker=".", linewidth=1, linestyle="--", zorder=3)
        cost_axis = ax.secondary_xaxis("top", functions=(lambda x: x / per_dollar, lambda usd: usd * per_dollar))
        cost_axis.set_xlabel(f"running cost (USD, {price_label})" if price_label else "running cost (USD)", fontsize="small")
        handles.append(line)
        labels.append("running cost")
    # Below the plot, so it never covers a bar or a miss label.
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(len(calls), 3)), fontsize="small", ncols=5, frameon=False)
    # Block labels (model · layout · cache) can be long: a title wider than the figure is clipped.
    # The title goes above the figure (suptitle), clear of the running-cost axis on top.
    title = titled(f"Calls of {trajectory.task_name} ({trajectory.block})", price_label)
    fig.suptitle("\n".join(textwrap.wrap(title, width=TITLE_CHARS, break_on_hyphens=False)), fontsize="medium")
    _make_room(fig, ax, marks, span * 1.05)
    return fig


def _make_room(fig: Figure, ax, marks: list, least: float) -> None:
    """Widen the token axis so every mark (written a fixed number of points after its bar's end)
    ends inside the axes. Measured on the laid-out figure: how much room a label needs depends
    on its length and the font, not on the token counts."""
    if not marks:
        return
    fig.draw_without_rendering()
    box = ax.get_window_extent()
    room = box.width - 6  # pixels, with a small margin at the right edge
    right = least
    for end, mark in marks:
        label_px = mark.get_window_extent().x1 - box.x0 - end / ax.get_xlim()[1] * box.width
        # The bar's end must sit at end / right of the width, leaving label_px after it.
        free = room - label_px
        right = max(right, end * box.width / free if free > box.width * 0.2 else end * 5)
    ax.set_xlim(0, right)


def report_figures(report: Report) -> list[tuple[str, str, Figure]]:
    """The report's pictures as (file stem, caption, figure), labelled with the report's pricing."""
    label = report.price_label
    figures = [
        (
            "cost_per_passed_task_vs_pass_rate",
            titled("Cost per passed task vs pass rate", label),
            cost_vs_pass_rate(report.blocks, price_label=label),
        )
    ]
    if report.trajectory is not None:
        # The same task in every layout and cache mode the report compares, on one token scale.
        sides = [report.trajectory, *report.compared]
        span = longest_call(sides)
        for i, side in enumerate(sides):
            figures.append(
                (
                    "calls_per_task" if i == 0 else f"calls_per_task_{i + 1}",
                    titled(f"Calls of task {side.task_name} ({side.block})", label),
                    call_bars(side, price_label=label, token_span=span),
                )
            )
    return figures


def to_svg(fig: Figure) -> str:
    """The figure as an SVG element (no XML prolog), ready to inline in HTML."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_METADATA_SVG)
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def to_png(fig: Figure, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata=_METADATA_PNG)
    return buf.getvalue()


def save(fig: Figure, path: str) -> None:
    """Write PNG or SVG according to the file's suffix."""
    suffix = path.rsplit(".", 1)[-1].lower()
    if suffix == "svg":
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(to_svg(fig))
    elif suffix == "png":
        with open(path, "wb") as fh:
            fh.write(to_png(fig))
    else:
        raise ValueError(f"picture format .{suffix} not supported: use .png or .svg")


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "picture"
