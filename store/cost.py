"""Dollars for one call, and totals over many calls.

Each bucket of a `Usage` is billed at its own rate: fresh input at the input rate, each write
TTL class at its write rate, reads at the read rate, output (thinking included) at the output
rate. Reasoning is part of output and is never billed again. A bucket whose count is unknown
has an unknown cost, and so has the total: a partial sum is not shown as if it were the cost.

On top of the tokens: a geography or speed the usage reports multiplies every token rate by the
schedule's modifier (they stack: Anthropic documents fast mode and US-only inference as
multipliers on all token categories, caching included), and each server-tool request (web search)
adds its per-request fee, which no modifier touches.

Totals over calls follow one rule for the hit ratio: Σread / Σ(read + write + fresh), summed
over calls, never a mean of per-call ratios. The share of calls with any hit is a different
figure and is named apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from hitrate.store.prices import PriceError, PriceSchedule, PriceTable, Tier, UnknownModelError
from hitrate.store.usage import BUCKETS, PROMPT_BUCKETS, SERVER_TOOL_COUNTS, WRITE_BUCKETS, Usage

#: Buckets that carry a price (reasoning is inside output).
BILLED_BUCKETS: tuple[str, ...] = (*PROMPT_BUCKETS, "output")

_PER_TOKEN = 1_000_000


class CostBreakdown(BaseModel):
    """USD per bucket for one call. `None` = not computable (unknown tokens or no rate)."""

    model_config = ConfigDict(frozen=True)

    model: str
    """The name asked for."""
    priced_as: str | None = None
    """The price-table entry used (after alias / dated-suffix resolution)."""
    price_snapshot_id: str | None = None
    fresh_input: float | None = None
    cache_write_5m: float | None = None
    cache_write_30m: float | None = None
    cache_write_1h: float | None = None
    cache_write_12h: float | None = None
    cache_read: float | None = None
    output: float | None = None
    server_tools: float | None = None
    """Per-request server-tool fees (web searches); 0.0 when the call ran none."""
    total: float | None = None
    """Sum of the buckets and the server-tool fees; None if any of them is None."""
    multiplier: float = 1.0
    """Product of the rate modifiers applied to every token rate (geography, speed)."""
    modifiers: list[str] = []
    """The modifiers applied, e.g. "inference_geo=us x1.1", "speed=fast x2"."""
    tier: str | None = None
    """"base" or the long-context tier applied (e.g. ">272K")."""
    peak: bool | None = None
    """Peak-hour rate applied (time-of-day priced models only)."""
    rates: Tier | None = None
    """The rates applied, USD per 1M tokens."""
    unpriced_reason: str | None = None
    """Why some or all of the cost is unknown."""

    @property
    def priced(self) -> bool:
        return self.total is not None

    def input_equivalent_tokens(self) -> float | None:
        """The cost expressed in tokens of the model's base input price (how the reference's
        worked examples are stated: e.g. 225K for ten cached turns vs 1,010K uncached)."""
        if self.total is None or self.rates is None or self.rates.input == 0:
            return None
        return self.total * _PER_TOKEN / self.rates.input


def cost(usage: Usage, model: str, at: datetime, table: PriceTable | None = None) -> CostBreakdown:
    """Price one call of `model` started at `at` (timezone-aware). An unknown model or a date
    without prices gives a breakdown with every amount None and `unpriced_reason` set, never a
    guessed price."""
    table = table or PriceTable.default()
    try:
        selection = table.rates_for(model, at, usage.prompt_tokens, usage.service_tier)
    except (UnknownModelError, PriceError) as exc:
        return CostBreakdown(model=model, price_snapshot_id=table.id, unpriced_reason=str(exc))

    tier = selection.tier
    missing: list[str] = []
    multiplier, applied = _modifiers(usage, selection.model, selection.schedule, missing)
    amounts: dict[str, float | None] = {}
    for bucket in BILLED_BUCKETS:
        tokens = getattr(usage, bucket)
        rate = tier.rate_for(bucket)
        if tokens is None:
            amounts[bucket] = None
            missing.append(f"{bucket} tokens unknown")
        elif tokens == 0:
            amounts[bucket] = 0.0
        elif rate is None:
            amounts[bucket] = None
            missing.append(f"{selection.model} has no {bucket} rate but {tokens} tokens were billed so")
        elif multiplier is None:
            amounts[bucket] = None
        else:
            amounts[bucket] = tokens * rate * multiplier / _PER_TOKEN
    amounts["server_tools"] = _server_tool_fees(usage, selection.model, selection.schedule, missing)
    known = [v for v in amounts.values() if v is not None]
    total = sum(known) if len(known) == len(amounts) else None
    return CostBreakdown(
        model=model,
        priced_as=selection.model,
        price_snapshot_id=table.id,
        total=total,
        tier=tier.label,
        peak=selection.peak,
        rates=tier,
        multiplier=multiplier if multiplier is not None else 1.0,
        modifiers=applied,
        # Zero tokens cost nothing at any rate: a reason only where the total is really unknown.
        unpriced_reason=("; ".join(missing) or None) if total is None else None,
        **amounts,
    )


# The value of each usage field that means "plain rates": the provider's default.
_DEFAULT_VALUES = {"inference_geo": ("global",), "speed": ("standard",)}


def _modifiers(usage: Usage, model: str, schedule: PriceSchedule, missing: list[str]) -> tuple[float | None, list[str]]:
    """The product of the rate modifiers the usage calls for, and their labels; None (with a reason
    in `missing`) when the usage reports a geography or speed the schedule has no price for."""
    product: float | None = 1.0
    applied: list[str] = []
    for field, table in (("inference_geo", schedule.inference_geo), ("speed", schedule.speed)):
        value = getattr(usage, field)
        if value is None or value in _DEFAULT_VALUES[field]:
            continue
        modifier = table.get(value)
        if modifier is None:
            missing.append(f"{model} has no price for {field}={value!r}")
            product = None
            continue
        applied.append(f"{field}={value} x{modifier.multiplier:g}")
        if product is not None:
            product *= modifier.multiplier
    return product, applied


def _server_tool_fees(usage: Usage, model: str, schedule: PriceSchedule, missing: list[str]) -> float | None:
    total: float | None = 0.0
    for field in SERVER_TOOL_COUNTS:
        requests = getattr(usage, field)
        if not requests:
            continue  # none ran, or the API does not report server tools (nothing billed per request)
        fee = schedule.server_tools.get(field)
        if fee is None:
            missing.append(f"{model} has no fee for {requests} {field}")
            total = None
        elif total is not None:
            total += requests * fee.usd_per_request
    return total


def miss_cost(miss_tokens: int | None, usage: Usage, breakdown: CostBreakdown) -> float | None:
    """What `miss_tokens` tokens that could have been read from the cache cost beyond a read, at
    the rates of `breakdown` (the call's own `cost`). They were paid as the call's largest write
    class, or as fresh input when it wrote nothing. None when the count is unknown or the call has
    no rates; 0.0 for no missed tokens."""
    if miss_tokens is None:
        return None
    rates = breakdown.rates
    if rates is None:
        return None
    if miss_tokens == 0:
        return 0.0
    written = {b: getattr(usage, b) or 0 for b in WRITE_BUCKETS}
    largest = max(written, key=lambda b: written[b])
    write_rate = rates.rate_for(largest)
    paid = write_rate if written[largest] > 0 and write_rate is not None else rates.input
    # A model without a read rate bills reads as input: then a miss costs nothing extra.
    read = rates.read if rates.read is not None else rates.input
    return miss_tokens * max(0.0, paid - read) * breakdown.multiplier / _PER_TOKEN


class UsageTotals(BaseModel):
    """Sums over a group of calls (a session, task, run, model, ...)."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    fresh_input: int = 0
    cache_write_5m: int = 0
    cache_write_30m: int = 0
    cache_write_1h: int = 0
    cache_write_12h: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int = 0
    unknown: dict[str, int] = {}
    """Per bucket, how many calls did not report it (their tokens are not in the sum above)."""
    hit_ratio: float | None = None
    """Σread / Σ(read + writes + fresh) over the calls whose prompt split is fully known."""
    calls_with_hit_share: float | None = None
    """Share of calls (with a known read count) that read anything from the cache. Not a hit
    ratio: one hit of 10 tokens counts as much as one of 100,000."""
    cost_usd: float | None = None
    """Sum over the priced calls; None when no call is priced."""
    unpriced_calls: int = 0
    """Calls whose cost is unknown (not in `cost_usd`)."""
    failed_calls: int = 0
    """Calls that ended in an error (included in `calls`; their missing buckets are not counted
    in `unknown`, which is about successful calls that did not report a bucket)."""
    flagged_calls: int = 0
    """Calls whose usage payload held a contradiction, stored with its best reading and flags
    (`Usage.flags`; `hitrate ledger --flagged` lists them)."""
    retries: int = 0
    """Rows that were a retry of a call (attempt 2 and later; included in `calls`, and in
    `failed_calls` when they failed too). Every attempt is a row, so `calls` counts requests."""
    interrupted_calls: int = 0
    """Rows never completed: their process ended during the call (included in `failed_calls`)."""

    @property
    def cache_write_total(self) -> int:
        return sum(getattr(self, bucket) for bucket in WRITE_BUCKETS)


def aggregate(calls: Iterable[tuple[Usage, float | None]]) -> UsageTotals:
    """Totals over (usage, cost in USD or None) pairs."""
    sums = dict.fromkeys(BUCKETS, 0)
    unknown = dict.fromkeys(BUCKETS, 0)
    n = 0
    ratio_read = ratio_prompt = 0
    with_read = with_hit = 0
    cost_sum = 0.0
    priced = 0
    flagged = 0
    for usage, call_cost in calls:
        n += 1
        flagged += usage.flagged
        for bucket in BUCKETS:
            value = getattr(usage, bucket)
            if value is None:
                unknown[bucket] += 1
            else:
                sums[bucket] += value
        prompt = usage.prompt_parts_sum
        if prompt is not None:
            ratio_read += usage.cache_read or 0
            ratio_prompt += prompt
        if usage.cache_read is not None:
            with_read += 1
            with_hit += usage.cache_read > 0
        if call_cost is not None:
            cost_sum += call_cost
            priced += 1
    return UsageTotals(
        calls=n,
        **sums,
        unknown={k: v for k, v in unknown.items() if v},
        hit_ratio=ratio_read / ratio_prompt if ratio_prompt else None,
        calls_with_hit_share=with_hit / with_read if with_read else None,
        cost_usd=cost_sum if priced else None,
        unpriced_calls=n - priced,
        flagged_calls=flagged,
    )
