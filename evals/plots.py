"""Report pictures, drawn with matplotlib's object API on the Agg / SVG canvases (no display, no
pyplot global state), written as PNG or SVG.

1. Cost per passed task (log x) against pass rate (y): one point per configuration, with the
   Wilson 95% interval as a vertical bar, and the Pareto frontier (cheaper and better) as a line.
2. One task's calls as horizontal stacked bars (read | write | fresh | output tokens) with each
   miss reason written at the end of its bar and the running cost on a second axis.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # never a GUI backend, even where a display exists

from matplotlib.figure import Figure  # noqa: E402

from hitrate.evals.report import Block, Trajectory  # noqa: E402

# Fixed SVG ids and no timestamp: the same report draws the same bytes.
matplotlib.rcParams["svg.hashsalt"] = "hitrate"
_METADATA_SVG = {"Date": None, "Creator": "hitrate"}
_METADATA_PNG = {"Software": "hitrate"}

BUCKET_COLOURS = {"read": "#2e7d32", "write": "#ef8f00", "fresh": "#c62828", "output": "#1565c0"}


def cost_vs_pass_rate(blocks: Sequence[Block]) -> Figure:
    """Cost per passed task against pass rate, one point per block."""
    fig = Figure(figsize=(7.0, 4.6), layout="constrained")
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
            label=f"{b.key.label} (n={b.n_scored})",
        )
    frontier = pareto_frontier([(b.cost_per_passed_task_usd, b.pass_rate * 100) for b in plotted])  # type: ignore[misc]
    if len(frontier) > 1:
        xs, ys = zip(*frontier)
        ax.plot(xs, ys, linestyle="--", color="grey", linewidth=1, label="Pareto frontier")
    ax.set_xscale("log")
    ax.set_xlabel("cost per passed task (USD, log scale)")
    ax.set_ylabel("pass rate (%) with 95% Wilson interval")
    ax.set_ylim(-2, 102)
    ax.grid(True, which="both", alpha=0.3)
    skipped = [b.key.label for b in blocks if b not in plotted]
    if plotted:
        ax.legend(fontsize="small", loc="best")
    if skipped:
        why = "no passed task or unknown price"
        ax.text(0.01, 0.01, f"not shown ({why}): " + "; ".join(skipped), transform=ax.transAxes, fontsize="x-small", va="bottom")
    ax.set_title("Cost per passed task vs pass rate")
    return fig


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both cost (lower) and pass rate (higher), by cost."""
    best = -1.0
    out = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return out


def call_bars(trajectory: Trajectory) -> Figure:
    """One bar per call: read | write | fresh | output tokens, miss reasons at the bar ends."""
    calls = trajectory.calls
    fig = Figure(figsize=(8.0, max(2.5, 0.32 * len(calls) + 1.4)), layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(len(calls)))
    left = [0] * len(calls)
    for name in ("read", "write", "fresh", "output"):
        widths = [getattr(c, name) or 0 for c in calls]
        ax.barh(ys, widths, left=left, color=BUCKET_COLOURS[name], label=name, height=0.7)
        left = [a + b for a, b in zip(left, widths)]
    span = max(left, default=0) or 1
    for y, end, call in zip(ys, left, calls):
        unknown = [n for n in ("read", "write", "fresh", "output") if getattr(call, n) is None]
        text = call.miss_reason or ""
        if unknown:
            text = (text + " " if text else "") + f"[{', '.join(unknown)} unknown]"
        if text:
            ax.text(end + span * 0.01, y, text, va="center", fontsize="x-small")
    ax.set_yticks(ys, [f"#{c.index}" for c in calls])
    ax.invert_yaxis()
    ax.set_xlim(0, span * 1.45)
    ax.set_xlabel("tokens")
    handles, labels = ax.get_legend_handles_labels()
    running = []
    total = 0.0
    for call in calls:
        total += call.cost_usd or 0.0
        running.append(total)
    if any(c.cost_usd is not None for c in calls):
        cost_ax = ax.twiny()
        (line,) = cost_ax.plot(running, ys, color="#444444", marker=".", linewidth=1, linestyle="--")
        cost_ax.set_xlim(0, (running[-1] or 1) * 1.45)
        cost_ax.set_xlabel("running cost (USD)")
        handles.append(line)
        labels.append("running cost")
    # Below the plot, so it never covers a bar or a miss label.
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(len(calls), 3)), fontsize="small", ncols=5, frameon=False)
    ax.set_title(f"Calls of {trajectory.task_name} ({trajectory.block})", fontsize="medium")
    return fig


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
