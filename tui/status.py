"""The one-line status bar above the prompt box.

It must fit any terminal, and what it keeps longest is what the agent is doing (the activity: what,
for how long, tokens streamed so far), so a user can always tell a working agent from a stuck one.
Each segment has a rank and one or more forms, longest first. While the line is too wide, the
segment with the highest rank gives up a detail (its next form) or, when it has none left, goes.
The activity has rank 0: only once everything else is gone is it shortened, then cut.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict
from rich.text import Text
from textual.widget import Widget

from hitrate.store.cost import UsageTotals
from hitrate.tui.activity import Activity
from hitrate.tui.figures import fmt_ratio, fmt_tokens, fmt_usd
from hitrate.tui.ttl import CacheClock

SEPARATOR = " │ "

#: The activity's rank: dropped last (never, in fact: it is cut to what fits instead).
ACTIVITY = 0
#: When the activity gives up a detail (its step number, the size of the request): after the model,
#: the clock's reason, the call count and the token buckets, before the clock, Σhit and cost.
ACTIVITY_DETAIL = 4


class Segment(BaseModel):
    """One part of the status line: its forms, longest first; the rank at which each form is given
    up for the next (`shorten`, one fewer than the forms; default the segment's rank); and the
    rank at which the last form goes (higher goes first)."""

    model_config = ConfigDict(frozen=True)

    forms: tuple[str, ...]
    rank: int
    shorten: tuple[int, ...] | None = None

    def shorten_rank(self, form: int) -> int:
        return self.shorten[form] if self.shorten is not None else self.rank


def activity_segment(activity: Activity, now: datetime | None, keepalive: str | None) -> Segment:
    forms = activity.forms(now) if now is not None else [(activity.what, False)]
    if keepalive:  # the keep-alive state rides with the activity (it is what the idle app does)
        forms = [(f"{forms[0][0]} · {keepalive}", True), *forms]
    texts = tuple(text for text, _ in forms)
    return Segment(forms=texts, rank=ACTIVITY, shorten=tuple(ACTIVITY_DETAIL if minor else ACTIVITY for _, minor in forms[:-1]))


def status_segments(
    model_label: str,
    activity: Activity,
    totals: UsageTotals,
    clock: CacheClock,
    keepalive: str | None = None,
    now: datetime | None = None,
) -> list[Segment]:
    """model │ activity [· keep-alive] │ calls │ Σhit │ R/W/F/O │ cost │ cache clock.
    Drop order: the model (it is in the panel and the welcome line), the clock's reason, the call
    count, the token buckets, the activity's details, the clock, Σhit, cost; the activity last. `now`: for the activity's elapsed time (None: the activity without its clock)."""
    return [
        Segment(forms=(model_label,), rank=8),
        activity_segment(activity, now, keepalive),
        Segment(forms=(f"{totals.calls} call" + ("" if totals.calls == 1 else "s"),), rank=6),
        Segment(forms=(f"Σhit {fmt_ratio(totals.hit_ratio)}",), rank=2),
        Segment(
            forms=(
                f"R {fmt_tokens(totals.cache_read)} W {fmt_tokens(totals.cache_write_total)} "
                f"F {fmt_tokens(totals.fresh_input)} O {fmt_tokens(totals.output)}",
            ),
            rank=5,
        ),
        Segment(forms=(fmt_usd(totals.cost_usd),), rank=1),
        Segment(forms=tuple(dict.fromkeys((f"cache {clock.render()}", f"cache {clock.render_short()}"))), rank=3, shorten=(7,)),
    ]


def fit_segments(segments: list[Segment], width: int | None) -> str:
    """Join the segments, taking details and then whole segments away, highest rank first, until
    the line fits `width` columns; an activity that alone is still too wide is cut with "…"."""
    chosen = {i: 0 for i in range(len(segments))}

    def line() -> str:
        return SEPARATOR.join(segments[i].forms[form] for i, form in sorted(chosen.items()))

    if width is None:
        return line()
    while len(line()) > width:
        steps = []  # (rank, index): shorten a segment with a shorter form, else drop it
        for i, form in chosen.items():
            segment = segments[i]
            if form + 1 < len(segment.forms):
                steps.append((segment.shorten_rank(form), i))
            elif segment.rank != ACTIVITY:
                steps.append((segment.rank, i))
        if not steps:
            return line()[: max(width - 1, 0)] + "…"
        _, worst = max(steps)
        if chosen[worst] + 1 < len(segments[worst].forms):
            chosen[worst] += 1
        else:
            del chosen[worst]
    return line()


class StatusLine(Widget):
    """Styled by the cache state class (-warm / -expiring / -cold / -unknown) in app.tcss; fits
    itself to its width on every render, so a resize needs no new figures."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._segments: list[Segment] = []

    def show(self, segments: list[Segment], clock: CacheClock) -> None:
        for state in ("warm", "expiring", "cold", "unknown"):
            self.set_class(clock.state == state, f"-{state}")
        self._segments = segments
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
