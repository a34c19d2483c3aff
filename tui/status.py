"""The one-line status bar above the prompt box.

It must fit any terminal: segments carry a rank, and the least needed ones are dropped first when
the line is wider than the bar. Cost, the Σ-hit ratio and the cache clock are never dropped: they
are what a user of a cache-aware harness glances at (an 80-column terminal keeps them).
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from hitrate.store.cost import UsageTotals
from hitrate.tui.figures import fmt_ratio, fmt_tokens, fmt_usd
from hitrate.tui.ttl import CacheClock

SEPARATOR = " │ "

#: Drop order when the bar is too narrow: the highest rank goes first; rank 0 always stays.
_KEEP = 0


def status_segments(
    model_label: str, activity: str, totals: UsageTotals, clock: CacheClock, keepalive: str | None = None
) -> list[tuple[str, int]]:
    """model │ activity [· keep-alive] │ calls │ Σhit │ R/W/F/O │ cost │ cache clock, each with its rank.
    The keep-alive state rides with the activity (it is what the idle app is doing)."""
    return [
        (model_label, 3),
        (f"{activity} · {keepalive}" if keepalive else activity, 1),
        (f"{totals.calls} call" + ("" if totals.calls == 1 else "s"), 4),
        (f"Σhit {fmt_ratio(totals.hit_ratio)}", _KEEP),
        (
            f"R {fmt_tokens(totals.cache_read)} W {fmt_tokens(totals.cache_write_total)} "
            f"F {fmt_tokens(totals.fresh_input)} O {fmt_tokens(totals.output)}",
            2,
        ),
        (fmt_usd(totals.cost_usd), _KEEP),
        (f"cache {clock.render()}", _KEEP),
    ]


def fit_segments(segments: list[tuple[str, int]], width: int | None) -> str:
    """Join the segments, dropping the highest-ranked ones until the line fits `width` columns.
    An activity that still does not fit is cut with an ellipsis rather than dropped whole, as long
    as a few of its characters can be shown."""
    kept = list(segments)
    line = SEPARATOR.join(text for text, _ in kept)
    if width is None:
        return line
    while len(line) > width and any(rank > _KEEP for _, rank in kept):
        worst = max(rank for _, rank in kept)
        candidate = [(t, r) for t, r in kept if r != worst]
        if worst == 1:
            # The activity: cut it to what is left before giving it up.
            room = width - len(SEPARATOR.join(t for t, _ in candidate)) - len(SEPARATOR)
            if room >= 6:
                index = next(i for i, (_, r) in enumerate(kept) if r == worst)
                text = kept[index][0]
                kept[index] = (text[: room - 1] + "…", worst)
                return SEPARATOR.join(t for t, _ in kept)
        kept = candidate
        line = SEPARATOR.join(text for text, _ in kept)
    return line


def status_text(
    model_label: str,
    activity: str,
    totals: UsageTotals,
    clock: CacheClock,
    keepalive: str | None = None,
    width: int | None = None,
) -> str:
    return fit_segments(status_segments(model_label, activity, totals, clock, keepalive), width)


class StatusLine(Widget):
    """Styled by the cache state class (-warm / -expiring / -cold / -unknown) in app.tcss; fits
    itself to its width on every render, so a resize needs no new figures."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._segments: list[tuple[str, int]] = []

    def show(self, model_label: str, activity: str, totals: UsageTotals, clock: CacheClock, keepalive: str | None = None) -> None:
        for state in ("warm", "expiring", "cold", "unknown"):
            self.set_class(clock.state == state, f"-{state}")
        self._segments = status_segments(model_label, activity, totals, clock, keepalive)
        self.refresh()

    @property
    def full_text(self) -> str:
        """Every segment, as a bar wide enough would show it."""
        return fit_segments(self._segments, None)

    @property
    def text(self) -> str:
        """What is on screen now."""
        return fit_segments(self._segments, self.content_size.width or None)

    def render(self) -> Text:
        return Text(self.text, no_wrap=True, overflow="ellipsis")
