"""How long the cached prefix is likely to stay warm: a pure function of the cache family's
lifetime rule (`projection.caching`), the TTL class the prefix was written with, and when the last
call that touched the cache started.

Nothing here reads a clock: callers pass `now`, so the countdown is testable and snapshots are
stable. The wording stays honest: "warm" only inside a window the provider documents, "unknown"
where the provider documents no clock (best-effort caches, LRU caches without a TTL).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hitrate.harness.keepalive import format_clock
from hitrate.projection.caching import CacheRules, family_for, family_of_mechanism
from hitrate.projection.caching.ttl import Lifetime, shortest
from hitrate.store.prices import PriceTable
from hitrate.store.usage import WRITE_BUCKETS, Usage

Warmth = Literal["warm", "expiring", "cold", "unknown"]

#: Below this many seconds left in the documented window the prefix is shown as expiring.
EXPIRING_BELOW_S = 60.0


class CacheClock(BaseModel):
    """The state of the cached prefix at one moment."""

    model_config = ConfigDict(frozen=True)

    state: Warmth
    seconds_left: float | None = None
    """Seconds left in the documented window (warm / expiring); None otherwise."""
    idle_s: float | None = None
    """Seconds since the anchoring call started; None when there is no anchor."""
    rule_label: str | None = None
    reason: str = ""
    """Why the state is what it is, in a few words (shown when it is not a countdown)."""

    def render(self) -> str:
        """Compact text for the status line, e.g. "warm 4:12 (5m)" or "cold · idle 7m03s"."""
        suffix = f" ({self.rule_label})" if self.rule_label else ""
        if self.state in ("warm", "expiring") and self.seconds_left is not None:
            return f"{self.state} {format_clock(self.seconds_left)}{suffix}"
        if self.state == "expiring":
            return f"expiring? idle {format_idle(self.idle_s or 0)}{suffix}"
        if self.state == "cold":
            return f"cold · idle {format_idle(self.idle_s or 0)}{suffix}"
        return f"unknown · {self.reason}" if self.reason else "unknown"

    def render_short(self) -> str:
        """The state without its reason or rule, for a narrow status bar: "warm 4:12", "cold"."""
        if self.state in ("warm", "expiring") and self.seconds_left is not None:
            return f"{self.state} {format_clock(self.seconds_left)}"
        return self.state


def format_idle(seconds: float) -> str:
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def cache_clock(
    now: datetime,
    anchor: datetime | None,
    rule: Lifetime | None,
    *,
    no_rule_reason: str = "no TTL rule for this backend",
    expiring_below_s: float = EXPIRING_BELOW_S,
) -> CacheClock:
    """warm / expiring / cold / unknown for a prefix anchored at `anchor` (the start of the last
    call that refreshed it) under `rule`."""
    if rule is None or rule.guaranteed_s is None:
        return CacheClock(state="unknown", reason=no_rule_reason, rule_label=rule.label if rule else None)
    if anchor is None:
        return CacheClock(state="unknown", reason="nothing cached yet", rule_label=rule.label)
    if now.tzinfo is None or anchor.tzinfo is None:
        raise ValueError("cache_clock needs timezone-aware datetimes")
    idle = (now - anchor).total_seconds()
    if idle < 0:
        # A clock that went backwards (or an anchor from another machine): say so, claim nothing.
        return CacheClock(state="unknown", idle_s=idle, reason="last call is in the future", rule_label=rule.label)
    left = rule.guaranteed_s - idle
    if left > expiring_below_s:
        return CacheClock(state="warm", seconds_left=left, idle_s=idle, rule_label=rule.label)
    if left > 0:
        return CacheClock(state="expiring", seconds_left=left, idle_s=idle, rule_label=rule.label)
    if rule.longest_s is None:
        return CacheClock(state="unknown", idle_s=idle, reason="past the documented minimum", rule_label=rule.label)
    if idle < rule.longest_s:
        return CacheClock(state="expiring", idle_s=idle, rule_label=rule.label)
    return CacheClock(state="cold", idle_s=idle, rule_label=rule.label)


def newest_write_ttl(usage: Usage) -> str | None:
    """The TTL class of the newest cache entry a call wrote. With mixed TTLs the longer-lived
    entries come first and the shortest last, so the whole prefix lives only as long as that."""
    written = [bucket.removeprefix("cache_write_") for bucket in WRITE_BUCKETS if getattr(usage, bucket)]
    if not written:
        return None
    return shortest(written)


def touched_cache(usage: Usage) -> bool:
    """Whether the call read or wrote any cache entry (a known positive count)."""
    return bool(usage.cache_read) or any(getattr(usage, bucket) for bucket in WRITE_BUCKETS)


#: Why there is no countdown where the price table says why.
_NO_CACHE_REASON = {
    "none": "this model has no prompt cache",
    None: "model not in the price table",
}

#: The cache a backend has when its model is not in the price table.
_PROVIDER_MECHANISM = {
    "anthropic": "anthropic_breakpoints",
    "deepseek": "deepseek_prefix_units",
    "gemini": "gemini_implicit",
    # The bundled engine and vLLM / SGLang servers keep prefixes in an LRU pool.
    "local": "lru",
    "openai-compat": "lru",
}


def cache_mechanism(provider: str, model: str, prices: PriceTable | None = None) -> str | None:
    """The cache a model has: from the price table, else from what the provider always has."""
    if provider in ("local", "openai-compat"):
        return "lru"
    entry = (prices or PriceTable.default()).find(model)
    if entry is not None:
        return entry.cache_mechanism
    return _PROVIDER_MECHANISM.get(provider)


def ttl_rule(
    mechanism: str | None, ttl_class: str | None, write_ttls: tuple[str, ...] = (), *, extended_retention: bool = False
) -> Lifetime | None:
    """The lifetime of a prefix cached under `mechanism`, written with `ttl_class` when known."""
    family = family_of_mechanism(mechanism)
    if family is None:
        return None
    rules = CacheRules(family=family, extended_retention=extended_retention and family == "openai_implicit")
    return family_for(rules).lifetime(ttl_class, write_ttls)


def no_clock_reason(mechanism: str | None) -> str:
    family = family_of_mechanism(mechanism)
    reason = family_for(CacheRules(family=family)).no_clock_reason() if family is not None else None
    return reason or _NO_CACHE_REASON.get(mechanism, "no TTL rule")


class PrefixClock:
    """Follows the calls of one session and answers "how warm is the cached prefix now".

    The anchor is the start of the last call that refreshed the prefix. A model switch starts a
    new epoch: nothing cached for the old model helps the new one, so the anchor is dropped.
    """

    def __init__(self, provider: str, model: str, prices: PriceTable | None = None) -> None:
        self._prices = prices or PriceTable.default()
        self.anchor: datetime | None = None
        self.ttl_class: str | None = None
        self.switch(provider, model)

    def switch(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.mechanism = cache_mechanism(provider, model, self._prices)
        entry = None if self.mechanism == "lru" else self._prices.find(model)
        self.write_ttls: tuple[str, ...] = tuple(entry.write_ttls) if entry else ()
        self.extended_retention = entry is not None and entry.cache_retention == "24h"
        self.anchor = None
        self.ttl_class = None

    @property
    def rule(self) -> Lifetime | None:
        return ttl_rule(self.mechanism, self.ttl_class, self.write_ttls, extended_retention=self.extended_retention)

    def observe(self, started_at: datetime, usage: Usage) -> None:
        """Take one finished call of the current model into account."""
        written = newest_write_ttl(usage)
        if written is not None:
            self.ttl_class = written
        rule = self.rule
        refreshes = touched_cache(usage) or (rule is not None and rule.refreshed_by_any_call)
        if refreshes and (self.anchor is None or started_at >= self.anchor):
            self.anchor = started_at

    def clock(self, now: datetime) -> CacheClock:
        return cache_clock(now, self.anchor, self.rule, no_rule_reason=no_clock_reason(self.mechanism))
