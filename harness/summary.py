"""The end-of-session summary: calls, tokens per bucket, the Σ-based hit ratio, cost, and why any call
missed the cache. Built from the session's ledger rows, so it shows exactly what was recorded."""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel, ConfigDict

from hitrate.store.cost import UsageTotals, aggregate
from hitrate.store.records import CallRecord


class MissLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    step: int
    call_id: str
    reason: str
    tokens: int | None
    cost_usd: float | None


class EpochLine(BaseModel):
    """One epoch of the session and what starting it cost in lost cache."""

    model_config = ConfigDict(frozen=True)

    number: int
    reason: str
    model: str
    first_step: int
    miss_tokens: int | None = None
    miss_cost_usd: float | None = None


class SessionSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    model: str
    status: str = ""
    steps: int = 0
    calls: int
    """Calls that returned (recorded with usage)."""
    failed_calls: int
    totals: UsageTotals
    """Token and cost sums over the calls that returned."""
    misses: list[MissLine]
    epochs: list[EpochLine]

    @property
    def hit_ratio(self) -> float | None:
        return self.totals.hit_ratio

    @property
    def costmoney(self) -> float | None:
        return self.totals.cost_usd


def summarize(
    session_id: str,
    model: str,
    records: Sequence[tuple[int, CallRecord]],
    epochs: Sequence[EpochLine],
    *,
    status: str = "",
    steps: int = 0,
) -> SessionSummary:
    """`records` are (step, ledger row) pairs in call order."""
    ok = [(s, r) for s, r in records if r.error is None]
    failed = len(records) - len(ok)
    totals = aggregate((r.usage, r.cost_usd) for _, r in ok)
    misses = [
        MissLine(step=s, call_id=r.id, reason=r.miss_reason, tokens=r.miss_tokens, cost_usd=r.miss_cost_usd)
        for s, r in ok
        if r.miss_reason
    ]
    return SessionSummary(
        session_id=session_id,
        model=model,
        status=status,
        steps=steps,
        calls=len(ok),
        failed_calls=failed,
        totals=totals,
        misses=misses,
        epochs=list(epochs),
    )


def count_text(value: int | None) -> str:
    """A token count with thousands separators; "?" when the server did not report it."""
    return "?" if value is None else f"{value:,}"


def money(value: float | None) -> str:
    """Dollars to four decimals (`$0.0151`), cents from $100; "unpriced" when there is no price:
    an unpriced cost is never shown as $0."""
    if value is None:
        return "unpriced"
    if value == 0:
        return "$0"
    if abs(value) < 0.00005:
        return "<$0.0001"
    return f"${value:,.4f}" if abs(value) < 100 else f"${value:,.2f}"


def summary_lines(summary: SessionSummary) -> list[str]:
    """The summary as plain text lines (the CLI prints them; tests read them)."""
    t = summary.totals
    ratio = "n/a" if t.hit_ratio is None else f"{t.hit_ratio:.1%}"
    lines = [
        f"session {summary.session_id} on {summary.model}: {summary.status or 'done'} after {summary.steps} step(s)",
        f"calls: {summary.calls}" + (f" (+{summary.failed_calls} failed)" if summary.failed_calls else ""),
        "tokens: "
        + f"cache read {count_text(t.cache_read)} | cache write {count_text(t.cache_write_total)}"
        + (f" (5m {count_text(t.cache_write_5m)}, 1h {count_text(t.cache_write_1h)})" if t.cache_write_1h else "")
        + f" | fresh {count_text(t.fresh_input)} | output {count_text(t.output)}",
        f"hit ratio (Σread / Σ(read+write+fresh)): {ratio}",
        f"cost: {money(t.cost_usd)}" + (f" ({t.unpriced_calls} call(s) unpriced)" if t.unpriced_calls and t.cost_usd is not None else ""),
    ]
    # Reasoning is a subset of output that most APIs do not report apart; its absence is not news.
    unknown = {k: v for k, v in t.unknown.items() if k != "reasoning"}
    if unknown:
        lines.append("not reported by the server: " + ", ".join(f"{k} in {v} call(s)" for k, v in sorted(unknown.items())))
    if summary.misses:
        lines.append("misses:")
        for m in summary.misses:
            cost = "" if m.cost_usd is None else f", {money(m.cost_usd)} more than a hit"
            lines.append(f"  step {m.step}: {m.reason} ({count_text(m.tokens)} tokens not read{cost})")
    else:
        lines.append("misses: none")
    for e in summary.epochs[1:]:
        cost = "" if e.miss_cost_usd is None else f", {money(e.miss_cost_usd)}"
        lines.append(f"epoch {e.number} from step {e.first_step}: {e.reason} (lost cache: {count_text(e.miss_tokens)} tokens{cost})")
    return lines
