"""The context gauge: how much of the model's window the session's prompt fills, and where it
will compact. Shown under the session figures in the cache panel."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from hitrate.tui.figures import CallFigure, fmt_tokens

CELL = " "
"""The bar is coloured blanks, like the call bars (a block glyph may not fill its cell)."""


def context_used(calls: list[CallFigure]) -> int | None:
    """The prompt the session sends now: the last agent or summary call that returned (a summary
    call's prompt stands for the history it replaced until the next call reports)."""
    for call in reversed(calls):
        if call.error is None and not call.keepalive and call.usage.prompt_tokens:
            return call.usage.prompt_tokens + (call.usage.output or 0)
    return None


def gauge_line(used: int | None, window: int | None, compact_at: float, *, compact: bool) -> str:
    """The gauge's words, e.g. "context 12.3k/30.0k · 41% · compacts 80%" (fits the panel)."""
    if window is None:
        return "ctx ? (no window)" if compact else f"context {fmt_tokens(used or 0)}/? (window unknown)"
    share = (used or 0) / window
    if compact:
        return f"ctx {share:.0%} of {fmt_tokens(window)}"
    return f"context {fmt_tokens(used or 0)}/{fmt_tokens(window)} · {share:.0%} · compacts {compact_at:.0%}"


class ContextGauge(Widget):
    """Used against the window, as a bar with a tick at the compaction threshold, then the words."""

    COMPONENT_CLASSES = {"context-gauge--used", "context-gauge--near", "context-gauge--free", "context-gauge--mark"}
    DEFAULT_CSS = "ContextGauge { height: auto; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.used: int | None = None
        self.window: int | None = None
        self.compact_at = 0.8

    def show(self, used: int | None, window: int | None, compact_at: float) -> None:
        if (used, window, compact_at) != (self.used, self.window, self.compact_at):
            self.used, self.window, self.compact_at = used, window, compact_at
            self.refresh(layout=True)

    def _style(self, part: str) -> Style:
        return self.get_component_rich_style(f"context-gauge--{part}", partial=True)

    def render(self) -> Text:
        compact = self.screen.has_class("-narrow")
        words = gauge_line(self.used, self.window, self.compact_at, compact=compact)
        if self.window is None or compact:
            return Text(words)
        width = max(8, self.size.width)
        filled = min(width, round(width * (self.used or 0) / self.window))
        mark = min(width - 1, round(width * self.compact_at))
        near = (self.used or 0) >= 0.9 * self.compact_at * self.window
        text = Text()
        for i in range(width):
            if i == mark:
                text.append("│", style=self._style("mark"))
            elif i < filled:
                text.append(CELL, style=self._style("near" if near else "used"))
            else:
                text.append(CELL, style=self._style("free"))
        text.append("\n" + words)
        return text
