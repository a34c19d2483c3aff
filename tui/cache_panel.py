"""The cache panel: what the prompt cache did for each call, and for the session so far."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.message import Message
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from hitrate.store.cost import UsageTotals
from hitrate.tui.context_gauge import ContextGauge
from hitrate.tui.figures import CallFigure, error_line, bar_cells, bar_parts, fmt_ratio, fmt_tokens, fmt_usd
from hitrate.tui.ttl import CacheClock

#: The screen class of the app's narrow horizontal breakpoint (`HitrateApp.HORIZONTAL_BREAKPOINTS`).
NARROW = "-narrow"

PART_LETTERS = {"read": "R", "write": "W", "fresh": "F", "output": "O", "unsplit": "prompt"}
#: Parts drawn in another part's colour.
PART_STYLE = {"unsplit": "unknown"}
#: Bars are coloured blanks (the colour is the background), which draw the same in every terminal
#: font and in SVG screenshots; a glyph such as █ may not fill its cell.
BAR_CELL = " "


class _BarColours(Widget):
    """Widgets drawing bar parts; the colours are component classes styled in app.tcss."""

    COMPONENT_CLASSES = {
        "call-bar--read",
        "call-bar--write",
        "call-bar--fresh",
        "call-bar--output",
        "call-bar--unknown",
        "call-bar--miss",
        "call-bar--dim",
    }

    def _style(self, part: str) -> Style:
        return self.get_component_rich_style(f"call-bar--{part}", partial=True)


class BarLegend(_BarColours):
    """A colour swatch for each part of the bars."""

    def render(self) -> Text:
        text = Text()
        for part in ("read", "write", "fresh", "output"):
            text.append(BAR_CELL * 2, style=self._style(part))
            text.append(f" {part}  ")
        return text


def is_compact(widget: Widget) -> bool:
    """The panel is in its compact form on a narrow screen (the app's horizontal breakpoint)."""
    return widget.screen.has_class(NARROW)


class CallBar(_BarColours):
    """One call: a read / write / fresh / output bar, its cost, its counts, and why it missed.
    Compact (narrow screen): one line, the bar, a ✗ for a miss or a failure, and the cost."""

    def __init__(self, figure: CallFigure) -> None:
        super().__init__(
            classes="call-bar" + (" -miss" if figure.missed else "") + (" -failed" if figure.error else "")
            + (" -keepalive" if figure.keepalive else "") + (" -compaction" if figure.compaction else "")
        )
        self.figure = figure

    def render(self) -> Text:
        fig = self.figure
        parts = bar_parts(fig.usage)
        compact = is_compact(self)
        head = f"#{fig.number} "
        cost = f" {fmt_usd(fig.cost_usd)}"
        unknown = [p for p, n in parts.items() if n is None]
        marker = "?" if unknown else ""
        if compact and (fig.missed or fig.error):
            marker += "✗"
        width = max(4, self.size.width - len(head) - len(cost) - len(marker))
        text = Text(head, style=self._style("dim"))
        used = 0
        for part, cells in bar_cells(parts, width):
            text.append(BAR_CELL * cells, style=self._style(PART_STYLE.get(part, part)))
            used += cells
        if used == 0:
            text.append("·" * width, style=self._style("unknown"))
        elif used < width:
            text.append(" " * (width - used))
        if marker:
            text.append(marker, style=self._style("miss" if compact and marker.endswith("✗") else "unknown"))
        text.append(cost)
        if compact:
            return text
        for line in self._count_lines(parts):
            text.append(f"\n   {line}", style=self._style("dim"))
        if fig.error:
            text.append(f"\n   ✗ {error_line(fig.error)[:60]}", style=self._style("miss"))
        elif fig.missed:
            extra = f" · +{fmt_usd(fig.miss_cost_usd)}" if fig.miss_cost_usd is not None else ""
            text.append(f"\n   ✗ {fig.miss_reason}{extra}", style=self._style("miss"))
        return text

    def _count_lines(self, parts: dict[str, int | None], width: int | None = None) -> list[str]:
        """The token counts under the bar, led by what kind of call it was: on one line when that
        fits the panel, else the kind on a line of its own (every count stays readable)."""
        fig = self.figure
        # A warm-up is not an agent step: it only kept the cached prefix alive; a summary call
        # replaced the history.
        label = "keep-alive" if fig.keepalive else "compaction" if fig.compaction else ""
        room = (width if width is not None else self.size.width) - 3
        items = [f"{PART_LETTERS[p]} {fmt_tokens(n)}" for p, n in parts.items()]
        wide, tight = "  ".join(items), " ".join(items)
        for counts in (wide, tight):
            line = f"{label} · {counts}" if label else counts
            if len(line) <= room:
                return [line]
        counts = wide if len(wide) <= room else tight
        return [label, counts] if label else [counts]

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        if is_compact(self):
            return 1
        lines = 1 + len(self._count_lines(bar_parts(self.figure.usage), width))
        return lines + (1 if (self.figure.missed or self.figure.error) else 0)


def summary_text(
    model_label: str, backend: str, totals: UsageTotals, misses: int, miss_cost: float | None, *, compact: bool = False
) -> str:
    """The session figures at the top of the panel; compact: what fits a narrow column (the
    buckets and the model are on the status line and in /cost)."""
    if compact:
        lines = [f"Σhit {fmt_ratio(totals.hit_ratio)} · {totals.calls} call" + ("" if totals.calls == 1 else "s"),
                 f"cost {fmt_usd(totals.cost_usd)}"]
        if misses:
            lines.append(f"misses {misses}" + (f" +{fmt_usd(miss_cost)}" if miss_cost is not None else ""))
        return "\n".join(lines)
    lines = [
        f"{backend} · {model_label}",
        f"calls {totals.calls}   Σhit {fmt_ratio(totals.hit_ratio)}",
        f"cost {fmt_usd(totals.cost_usd)}" + (f" ({totals.unpriced_calls} unpriced)" if totals.unpriced_calls else ""),
        f"R {fmt_tokens(totals.cache_read)}  W {fmt_tokens(totals.cache_write_total)}  "
        f"F {fmt_tokens(totals.fresh_input)}  O {fmt_tokens(totals.output)}",
    ]
    if misses:
        lines.append(f"misses {misses}" + (f" · {fmt_usd(miss_cost)} over hits" if miss_cost is not None else ""))
    return "\n".join(lines)


class CacheClockView(Static):
    """The TTL countdown of the cached prefix; its class names the state for styling."""

    def show(self, clock: CacheClock) -> None:
        for state in ("warm", "expiring", "cold", "unknown"):
            self.set_class(clock.state == state, f"-{state}")
        self.update(Text(f"● {clock.render()}" if is_compact(self) else f"● cache {clock.render()}"))


class KeepAliveView(Static):
    """The keep-alive warmer's state under the TTL clock; hidden when there is nothing to say."""

    def show(self, line: str | None) -> None:
        self.display = line is not None
        if line is not None:
            self.update(Text(line))


class CachePanel(Vertical):
    """Docked beside the conversation: session summary, the TTL clock, a legend and the calls."""

    class Resized(Message):
        """The panel changed width (it does at the narrow breakpoint): its text needs redrawing."""

    def compose(self) -> ComposeResult:
        yield Static("Cache", id="cache-title")
        yield Static("", id="cache-summary")
        yield ContextGauge(id="cache-context")
        yield CacheClockView("", id="cache-clock")
        yield KeepAliveView("", id="cache-keepalive")
        yield BarLegend(id="cache-legend")
        yield VerticalScroll(id="cache-calls")

    def on_mount(self) -> None:
        # The newest call stays in view unless the user scrolls back through older ones.
        self.query_one("#cache-calls", VerticalScroll).anchor()

    def on_resize(self) -> None:
        for bar in self.query(CallBar):
            bar.refresh(layout=True)
        self.post_message(self.Resized())

    def show_summary(self, text: str) -> None:
        self.query_one("#cache-summary", Static).update(Text(text))

    def show_context(self, used: int | None, window: int | None, compact_at: float) -> None:
        self.query_one(ContextGauge).show(used, window, compact_at)

    def show_clock(self, clock: CacheClock) -> None:
        self.query_one(CacheClockView).show(clock)

    def show_keepalive(self, line: str | None) -> None:
        self.query_one(KeepAliveView).show(line)

    async def add_call(self, figure: CallFigure) -> None:
        await self.query_one("#cache-calls", VerticalScroll).mount(CallBar(figure))

    async def clear_calls(self) -> None:
        await self.query_one("#cache-calls", VerticalScroll).remove_children()

