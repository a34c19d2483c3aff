"""Re-price a report's calls at one model's rates (`hitrate report --price-as MODEL`).

Runs on the bundled local engine, or on a backend the price table does not know, record their
token buckets but no cost. To compare them in dollars, every call's recorded buckets are priced
at the chosen model's rates, the way the ledger re-prices a run (`Ledger.reprice`): the store's
`cost` at the call's own start time, so a dated price change applies as it would have. The
result lives only in the report and is labelled there: the ledger rows keep their own costs.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from hitrate.store.cost import cost, miss_cost
from hitrate.store.prices import PriceTable, UnknownModelError
from hitrate.store.records import CallRecord

_MAX_REASONS = 3


class PriceAsError(ValueError):
    """The model to price as is not in the price table."""


class PricedAs(BaseModel):
    """The report's costs are not the ledger's: every call was re-priced at one model's rates."""

    model: str
    """The price-table entry used (e.g. "claude-sonnet-5")."""
    requested: str
    """The name asked for (an alias or a dated id resolves to `model`)."""
    price_snapshot_id: str
    unpriced_calls: int = 0
    """Calls that stayed unpriced (a bucket the backend did not report, no price on that date)."""
    unpriced_reasons: list[str] = []
    """Up to three distinct reasons why."""

    @property
    def label(self) -> str:
        return f"priced as {self.model}"


class Repricer:
    """Re-prices calls at one model's rates and keeps count of what stayed unpriced.

        repricer = Repricer("claude-sonnet-5")       # PriceAsError for a model the table lacks
        calls = repricer.reprice(ledger.calls(run_id=...))
        repricer.summary()                           # PricedAs, for the report's labels
    """

    def __init__(self, model: str, table: PriceTable | None = None) -> None:
        self.table = table or PriceTable.default()
        self.requested = model
        try:
            self.model = self.table.lookup(model).model
        except UnknownModelError as exc:
            raise PriceAsError(f"cannot price as {model!r}: {exc}") from exc
        self._unpriced = 0
        self._reasons: list[str] = []

    def reprice(self, calls: Iterable[CallRecord]) -> list[CallRecord]:
        """Copies of `calls` with `cost_usd`, `miss_cost_usd` and `price_snapshot_id` at the
        model's rates. The records passed in are not changed, and nothing is written anywhere."""
        out: list[CallRecord] = []
        for call in calls:
            breakdown = cost(call.usage, self.model, call.started_at, self.table)
            if breakdown.total is None:
                self._unpriced += 1
                reason = breakdown.unpriced_reason or "unknown"
                if reason not in self._reasons and len(self._reasons) < _MAX_REASONS:
                    self._reasons.append(reason)
            update = {
                "cost_usd": breakdown.total,
                "miss_cost_usd": miss_cost(call.miss_tokens, call.usage, breakdown),
                "price_snapshot_id": self.table.id,
            }
            out.append(call.model_copy(update=update))
        return out

    def summary(self) -> PricedAs:
        return PricedAs(
            model=self.model,
            requested=self.requested,
            price_snapshot_id=self.table.id,
            unpriced_calls=self._unpriced,
            unpriced_reasons=list(self._reasons),
        )
