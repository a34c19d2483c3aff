"""The one-line status bar above the prompt box."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from hitrate.store.cost import UsageTotals
from hitrate.tui.figures import fmt_ratio, fmt_tokens, fmt_usd
from hitrate.tui.ttl import CacheClock


def status_text(model_label: str, activity: str, totals: UsageTotals, clock: CacheClock, keepalive: str | None = None) -> str:
    """model │ activity [· keep-alive, when it has news] │ calls │ Σhit │ R/W/F/O │ cost │ cache clock.
    The keep-alive state rides with the activity (it is what the idle app is doing), where a long
    line does not cut it off."""
    parts = [
        model_label,
        f"{activity} · {keepalive}" if keepalive else activity,
        f"{totals.calls} call" + ("" if totals.calls == 1 else "s"),
        f"Σhit {fmt_ratio(totals.hit_ratio)}",
        f"R {fmt_tokens(totals.cache_read)} W {fmt_tokens(totals.cache_write_total)} "
        f"F {fmt_tokens(totals.fresh_input)} O {fmt_tokens(totals.output)}",
        fmt_usd(totals.cost_usd),
        f"cache {clock.render()}",
    ]
    return " │ ".join(parts)


class StatusLine(Static):
    """Styled by the cache state class (-warm / -expiring / -cold / -unknown) in app.tcss."""

    def show(self, model_label: str, activity: str, totals: UsageTotals, clock: CacheClock, keepalive: str | None = None) -> None:
        for state in ("warm", "expiring", "cold", "unknown"):
            self.set_class(clock.state == state, f"-{state}")
        self.update(Text(status_text(model_label, activity, totals, clock, keepalive), no_wrap=True, overflow="ellipsis"))
