"""Keep-alive: re-warm the cached prefix before its TTL runs out, only when that is expected to pay.

An idle interactive session loses its cached prefix once the provider's lifetime passes (Anthropic:
5m or 1h from the *start* of the last request that read or wrote the entry; OpenAI up to GPT-5.5:
cleared after 5-10 idle minutes; GPT-5.6+: 30 minutes at least). The next request then pays the
whole prefix again, as a cache write or as fresh input. A warm-up re-sends the last request byte
for byte with the least output allowed (`keepalive_call`): it reads the prefix, and a read renews
the entry's lifetime from that request's start.

The rule (`decide`), for the entry that expires first:

- when: at `refreshed_at + min(lead_fraction × TTL, TTL − min_lead_s)` (5m: 4:30; 1h: 54:00), where
  `refreshed_at` is the start of the last call that sent the prefix; a warm-up is never sent once
  the entry has expired (it would only write the prefix again, as the next request will);
- cost: the warm-up itself, priced like any call: a read of the live prefix, writes of whatever
  part had already expired, the tokens after the last mark as fresh input, its output tokens;
- saving: what the next request saves by finding the prefix warm (cost without the warm-up minus
  cost with it), if it comes within the window the warm-up covers (after the entry would have
  expired, before the renewed one does), times the chance that it does: a prior
  (`return_probability`, 0.15 for the first warm-up of an idle stretch, fading for later ones as
  the absence grows), blended with the session's own gaps between requests once it has some;
- warm when `probability × saving − cost ≥ min_net_saving_usd`; otherwise skip, saying why.

Caps bound what an absent user can cost: warm-ups per idle stretch and per session, and an idle
cap. The idle cap is never shorter than one TTL, so it cannot switch off keep-alive for a 1h entry
whose first refresh falls at 54 minutes (a fixed 30-minute cap would: it could never fire).

Providers without a TTL to beat are never warmed, with the reason: DeepSeek keeps prefix units on
disk for hours to days; vLLM / SGLang / llama.cpp servers and the bundled engine evict by memory
pressure, not by a clock; Gemini's implicit cache documents no lifetime. A fixed-interval ping
cannot help them; for the others it pays for some users and prefix sizes and wastes money for the
rest (`benchmarks/bench_keepalive.py` compares both with this rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.keepalive_call import KEEPALIVE_KIND, warm_output_tokens
from hitrate.projection.cache_view import cache_request
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.prompt import Prompt
from hitrate.store.cost import cost
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import BUCKETS, WRITE_BUCKETS, Usage

if TYPE_CHECKING:
    import threading

    from hitrate.harness.session import Session


class KeepAliveConfig(BaseModel):
    """When an idle session's cached prefix is worth warming."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    """Warm at all. Even when on, a warm-up is sent only if the rule below expects it to pay."""
    return_probability: float = Field(0.15, ge=0, le=1)
    """Chance that the next request comes within the window a warm-up covers, before the session's
    own gaps say otherwise."""
    learn_from_gaps: bool = True
    """Blend `return_probability` with the session's observed gaps between requests."""
    prior_weight: float = Field(2.0, gt=0)
    """How many observed gaps `return_probability` counts for in that blend."""
    lead_fraction: float = Field(0.9, gt=0, le=1)
    """Warm at this fraction of the TTL after the last refresh ..."""
    min_lead_s: float = Field(10.0, ge=0)
    """... or this many seconds before expiry, whichever comes first."""
    min_net_saving_usd: float = Field(0.01, ge=0)
    """Warm only when the expected saving exceeds the warm-up's cost by at least this much."""
    max_idle_s: float = Field(1800.0, gt=0)
    """No warm-up once the session has been idle this long, or one TTL if that is longer."""
    max_warmups_per_idle: int = Field(6, ge=0)
    """Most warm-ups between two requests of the agent."""
    max_warmups_total: int = Field(50, ge=0)
    """Most warm-ups in one session."""


class CacheEntry(BaseModel):
    """A cache entry the last request left: its first `tokens` prompt tokens, alive for `ttl_s`
    after the start of the last call that read or wrote them."""

    model_config = ConfigDict(frozen=True)

    tokens: int
    ttl_s: float
    label: str
    """The TTL class as shown: "5m", "1h", "30m", "5-10m idle"."""
    write_bucket: str | None
    """The usage bucket that bills writing it again; None where writes bill as plain input."""


class WarmContext(BaseModel):
    """What the decision reads about a session: its last request and its calls so far."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    provider: str
    """The model spec's provider (anthropic, openai, deepseek, gemini, local, openai-compat)."""
    model: str
    rules: CacheRules
    prompt: Prompt | None = None
    """The last request that returned; None before any did."""
    prompt_tokens: int | None = None
    """The provider's count of that prompt (calibrates the projection's estimates)."""
    cached_nothing: bool = False
    """The last request reported neither a cache read nor a write."""
    refreshed_at: datetime | None = None
    """Start of the last call that sent the prompt (the request itself or a warm-up of it)."""
    sent_at: datetime | None = None
    """Start of the agent's last request: the session has been idle since."""
    warmups_since: int = 0
    """Warm-ups sent since the agent's last request."""
    warmups_total: int = 0
    gaps_s: tuple[float, ...] = ()
    """Seconds between the starts of consecutive agent requests."""
    warm_output_tokens: int = 1
    blocked: str | None = None
    """Why the prefix cannot be re-sent now (model switched, bytes unknown, a warm-up failed)."""


Action = Literal["warm", "wait", "skip", "off"]


class KeepAliveDecision(BaseModel):
    """What to do about the cached prefix now, and why."""

    model_config = ConfigDict(frozen=True)

    action: Action
    """warm: send a warm-up now; wait: one is due at `warm_at`; skip: none will be sent for this
    entry (`reason`); off: keep-alive is turned off."""
    reason: str
    warm_at: datetime | None = None
    expires_at: datetime | None = None
    """When the entry that expires first is gone without a warm-up."""
    ttl_label: str | None = None
    tokens_at_risk: int | None = None
    """Prompt tokens the next request pays again if the entry expires."""
    probability: float | None = None
    probability_source: str = ""
    warm_cost_usd: float | None = None
    saving_if_back_usd: float | None = None
    """What the next request saves by finding the prefix warm."""
    net_usd: float | None = None
    """probability × saving_if_back − warm_cost: the expected gain of the warm-up."""
    warmups_since: int = 0

    @property
    def pays(self) -> bool:
        return self.action in ("warm", "wait")

    def render(self, now: datetime) -> str:
        """One line, e.g. "next warm in 3:40 (saves ~$0.04)" or "off: DeepSeek keeps …"."""
        saves = f" (saves ~{format_usd(self.net_usd)})" if self.net_usd is not None else ""
        if self.action == "wait" and self.warm_at is not None:
            return f"next warm in {format_clock((self.warm_at - now).total_seconds())}{saves}"
        if self.action == "warm":
            return f"warming now{saves}"
        return f"off: {self.reason}"


def format_clock(seconds: float) -> str:
    """m:ss (h:mm:ss from one hour), rounded up so "0:00" is only shown once the time is gone."""
    total = max(0, int(-(-seconds // 1)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_usd(value: float | None) -> str:
    if value is None:
        return "$?"
    return f"${value:.2f}" if abs(value) >= 0.01 else f"${value:.4f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 and seconds % 3600 == 0 else f"{seconds / 60:.0f}m"


def cache_entries(prompt: Prompt, rules: CacheRules, prompt_tokens: int | None, prices: PriceTable) -> list[CacheEntry]:
    """The entries `prompt` left in the cache, shortest prefix first, in provider tokens."""
    scale = prompt_tokens / prompt.total_tokens if prompt_tokens and prompt.total_tokens else 1.0
    family = family_for(rules)
    if rules.places_marks:
        price = prices.find(prompt.model)
        billed = price.writes_billed if price is not None else True
        entries = [
            CacheEntry(
                tokens=round(entry.tokens * scale),
                ttl_s=entry.ttl_s or 0.0,
                label=entry.ttl_class or "",
                write_bucket=f"cache_write_{entry.ttl_class}" if billed else None,
            )
            for entry in family.entries_left(cache_request(prompt), ())
        ]
        return sorted(entries, key=lambda e: e.tokens)
    lifetime = family.lifetime()
    if family.warming_blocked() is None and lifetime is not None and lifetime.guaranteed_s:
        # Automatic prefix caching: the whole prompt, in whole steps of the hit granularity;
        # nothing below the minimum. Writes are free: a lost prefix is paid as fresh input.
        total = prompt_tokens or prompt.total_tokens
        tokens = total - total % rules.prefix_granularity
        if tokens <= 0 or tokens < rules.min_cacheable_tokens:
            return []
        return [CacheEntry(tokens=tokens, ttl_s=float(lifetime.guaranteed_s), label=lifetime.label, write_bucket=None)]
    return []


def _bill(entries: Sequence[CacheEntry], alive: Sequence[bool], total: int, output: int) -> Usage:
    """The buckets of re-sending the prompt when the entries flagged in `alive` are still cached:
    a read up to the longest live one, each later entry written again at its own class, the rest
    fresh (Anthropic's rule for marks with mixed TTLs)."""
    read = max((e.tokens for e, ok in zip(entries, alive) if ok), default=0)
    counts = dict.fromkeys(BUCKETS, 0)
    counts["cache_read"] = read
    end = read
    for entry in entries:
        if entry.tokens <= end:
            continue
        counts[entry.write_bucket or "fresh_input"] += entry.tokens - end
        end = entry.tokens
    counts["fresh_input"] += max(0, total - end)
    counts["output"] = output
    return Usage(**counts)


def prior_probability(config: KeepAliveConfig, idle_at_warm: float, first_warm_s: float, window_s: float) -> float:
    """`return_probability` for the first warm-up of an idle stretch (at `first_warm_s`), fading for
    later ones: absences are heavy-tailed, so the longer the user has been away, the less likely
    they come back within the next window (P ∝ 1 / (idle + window))."""
    return config.return_probability * (first_warm_s + window_s) / (max(idle_at_warm, first_warm_s) + window_s)


def return_probability(
    gaps_s: Sequence[float], idle_at_warm: float, saved_from: float, saved_to: float, config: KeepAliveConfig,
    *, first_warm_s: float,
) -> tuple[float, str]:
    """Chance that the next request comes after `saved_from` and by `saved_to` seconds of idleness,
    given none came by `idle_at_warm`, and where the figure comes from. The prior
    (`prior_probability`) counts as `prior_weight` gaps among those the session has shown so far
    that lasted past `idle_at_warm`."""
    prior = prior_probability(config, idle_at_warm, first_warm_s, saved_to - idle_at_warm)
    if not config.learn_from_gaps:
        return prior, f"{prior:.0%} (fixed)"
    longer = [g for g in gaps_s if g > idle_at_warm]
    if not longer:
        return prior, f"{prior:.0%} (default; no gap this long yet)"
    inside = sum(1 for g in longer if saved_from < g <= saved_to)
    p = (inside + config.prior_weight * prior) / (len(longer) + config.prior_weight)
    return p, f"{p:.0%} ({inside} of {len(longer)} gaps this long came back in the window)"


def decide(context: WarmContext, now: datetime, config: KeepAliveConfig, prices: PriceTable) -> KeepAliveDecision:
    """Warm, wait, skip or off for the cached prefix of `context` at `now` (timezone-aware). Pure."""
    if now.tzinfo is None:
        raise ValueError("keep-alive decisions need a timezone-aware time")
    no_ttl = family_for(context.rules).warming_blocked()
    if no_ttl is not None:
        return KeepAliveDecision(action="skip", reason=no_ttl)
    prompt, anchor = context.prompt, context.refreshed_at
    if prompt is None or anchor is None:
        return KeepAliveDecision(action="skip", reason="nothing cached yet")
    if context.blocked is not None:
        return KeepAliveDecision(action="skip", reason=context.blocked, warmups_since=context.warmups_since)
    entries = cache_entries(prompt, context.rules, context.prompt_tokens, prices)
    if not entries or context.cached_nothing:
        return KeepAliveDecision(action="skip", reason="the last request cached nothing (prompt below the model's minimum?)")
    if now < anchor:
        return KeepAliveDecision(action="skip", reason="the last call started in the future (clock changed?)")

    alive_now = [anchor + timedelta(seconds=e.ttl_s) > now for e in entries]
    if not any(alive_now):
        gone = anchor + timedelta(seconds=min(e.ttl_s for e in entries))
        return KeepAliveDecision(
            action="skip", reason="the cached prefix has expired: the next request writes it again", expires_at=gone,
            warmups_since=context.warmups_since,
        )
    target = min((e for e, ok in zip(entries, alive_now) if ok), key=lambda e: e.ttl_s)
    ttl = target.ttl_s
    expires_at = anchor + timedelta(seconds=ttl)
    first_warm_s = min(config.lead_fraction * ttl, ttl - config.min_lead_s)
    warm_at = anchor + timedelta(seconds=first_warm_s)
    common = {"warm_at": warm_at, "expires_at": expires_at, "ttl_label": target.label, "warmups_since": context.warmups_since}

    # Caps: what an absent user can cost. The idle cap stretches to one TTL, so that a 1h entry
    # still gets its first refresh (at 54 minutes) whatever `max_idle_s` says.
    sent_at = context.sent_at or anchor
    idle_at_warm = (warm_at - sent_at).total_seconds()
    idle_cap = max(config.max_idle_s, ttl)
    if context.warmups_total >= config.max_warmups_total:
        return KeepAliveDecision(action="skip", reason=f"{context.warmups_total} warm-ups in this session: the most allowed", **common)
    if context.warmups_since >= config.max_warmups_per_idle:
        return KeepAliveDecision(
            action="skip", reason=f"stopped after {context.warmups_since} warm-ups since the last request (the most per idle stretch)",
            **common,
        )
    idle_when_sent = (max(warm_at, now) - sent_at).total_seconds()
    if idle_when_sent > idle_cap:
        return KeepAliveDecision(
            action="skip", reason=f"idle for {_minutes(idle_when_sent)}, past the {_minutes(idle_cap)} idle cap", **common
        )

    total = max(context.prompt_tokens or prompt.total_tokens, entries[-1].tokens)
    outlives = [anchor + timedelta(seconds=e.ttl_s) > expires_at for e in entries]
    warm_usage = _bill(entries, alive_now, total, context.warm_output_tokens)
    with_warm = _bill(entries, [True] * len(entries), total, 0)
    without_warm = _bill(entries, outlives, total, 0)
    warm_cost = cost(warm_usage, prompt.model, warm_at, prices).total
    cost_with = cost(with_warm, prompt.model, warm_at, prices).total
    cost_without = cost(without_warm, prompt.model, warm_at, prices).total
    if warm_cost is None or cost_with is None or cost_without is None:
        return KeepAliveDecision(action="skip", reason=f"no price for {prompt.model}: cannot tell whether a warm-up pays", **common)
    saving = max(0.0, cost_without - cost_with)
    # The warm-up pays off for a request that comes after the entry would have expired and before
    # the renewed one does; one that comes earlier would have found the prefix warm anyway.
    saved_from = (expires_at - sent_at).total_seconds()
    p, source = return_probability(context.gaps_s, idle_at_warm, saved_from, idle_at_warm + ttl, config, first_warm_s=first_warm_s)
    net = p * saving - warm_cost
    economics = {
        **common,
        "tokens_at_risk": (with_warm.cache_read or 0) - (without_warm.cache_read or 0),
        "probability": p,
        "probability_source": source,
        "warm_cost_usd": warm_cost,
        "saving_if_back_usd": saving,
        "net_usd": net,
    }
    if net < config.min_net_saving_usd:
        reason = (
            f"saves too little: {p:.0%} × {format_usd(saving)} − {format_usd(warm_cost)} = {format_usd(net)}, "
            f"under {format_usd(config.min_net_saving_usd)}"
        )
        return KeepAliveDecision(action="skip", reason=reason, **economics)
    if not config.enabled:
        return KeepAliveDecision(action="off", reason=f"turned off; a warm-up would save ~{format_usd(net)}", **economics)
    if now < warm_at:
        return KeepAliveDecision(action="wait", reason=f"warm at {warm_at:%H:%M:%S} UTC, before the {target.label} entry expires", **economics)
    return KeepAliveDecision(action="warm", reason=f"the {target.label} entry expires at {expires_at:%H:%M:%S} UTC", **economics)


def _touched_nothing(usage: Usage) -> bool:
    values = [usage.cache_read, *(getattr(usage, b) for b in WRITE_BUCKETS)]
    return all(v == 0 for v in values)


def warm_context(session: "Session") -> WarmContext:
    """The decision's view of a live (or resumed) session."""
    route = session.route
    records: list[CallRecord] = [r for _, r in session.records]
    agent = [r for r in records if r.kind != KEEPALIVE_KIND]
    last_agent = max((i for i, r in enumerate(records) if r.kind != KEEPALIVE_KIND), default=-1)
    warmups_since = sum(1 for r in records[last_agent + 1 :] if r.kind == KEEPALIVE_KIND)
    last_ok = next((r for r in reversed(agent) if r.error is None), None)
    previous = session.last_request
    blocked: str | None = None
    if previous is not None:
        if previous.unknown_from is not None:
            blocked = "the cached prefix's bytes are not known since the resume (project files changed)"
        elif previous.prompt.model != route.model:
            blocked = "the model changed since the last request"
        elif records and records[-1].kind == KEEPALIVE_KIND and records[-1].error and records[-1].started_at >= previous.started_at:
            blocked = f"the last warm-up failed ({records[-1].error.splitlines()[0][:80]})"
    # The explanation rules say how the backend really caches: the local engine plans marks the
    # Anthropic way but keeps prefixes in an LRU pool, with no clock to beat.
    rules = route.explain_rules
    marks = rules.places_marks
    return WarmContext(
        provider=route.spec.provider,
        model=route.model,
        rules=rules,
        prompt=previous.prompt if previous is not None else None,
        prompt_tokens=last_ok.usage.prompt_tokens if last_ok is not None else None,
        cached_nothing=marks and last_ok is not None and _touched_nothing(last_ok.usage),
        refreshed_at=previous.started_at if previous is not None else None,
        sent_at=agent[-1].started_at if agent else (previous.started_at if previous is not None else None),
        warmups_since=warmups_since,
        warmups_total=sum(1 for r in records if r.kind == KEEPALIVE_KIND),
        gaps_s=tuple((b.started_at - a.started_at).total_seconds() for a, b in zip(agent, agent[1:])),
        warm_output_tokens=warm_output_tokens(route.backend),
        blocked=blocked,
    )


class CacheWarmer:
    """Keep-alive policy of an interactive sitting: a config (with the on / off switch) applied to
    whichever session is current. Callers ask `decision(session, now)` on a timer and call `warm`
    when it says "warm"; warm-ups run on the thread that does the session's work."""

    def __init__(self, config: KeepAliveConfig | None = None) -> None:
        self.config = config or KeepAliveConfig()

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @enabled.setter
    def enabled(self, on: bool) -> None:
        self.config = self.config.model_copy(update={"enabled": on})

    def decision(self, session: "Session", now: datetime) -> KeepAliveDecision:
        return decide(warm_context(session), now, self.config, session.price_table)

    def warm(self, session: "Session", cancel: "threading.Event | None" = None) -> CallRecord:
        """Send the warm-up (recorded in the ledger as kind "keepalive"); raises like `Session.warm_up`."""
        return session.warm_up(cancel)
