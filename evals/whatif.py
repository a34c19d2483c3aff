"""What-if: the recorded requests of a run or session, replayed through another provider's cache
rules and prices, next to what they really had.

    requests = load_requests(ledger, "<run, session or task id>")
    result = whatif(requests, parse_target("anthropic/claude-sonnet-4-6"), WhatIfOptions(ttl="1h"))

The simulators (`sim_anthropic`, `sim_openai`, `sim_deepseek`, `sim_local`) give billing buckets
per request; this module picks one for the target's cache mechanism, prices the buckets with the
store's price table at each request's start time, and totals both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hitrate.evals.sim_anthropic import AnthropicSimConfig, simulate_anthropic
from hitrate.evals.sim_deepseek import DeepSeekSimConfig, simulate_deepseek
from hitrate.evals.sim_local import LocalSimConfig, simulate_local
from hitrate.evals.sim_naive import Volatility, naive_requests
from hitrate.evals.sim_openai import BreakpointSimConfig, PrefixSimConfig, simulate_openai_breakpoints, simulate_prefix_cache
from hitrate.evals.sim_types import Predicted, SimCall, SimRequest, SimSection
from hitrate.projection.caching import CacheRules, family_of_mechanism
from hitrate.projection.caching.rules import DEEPSEEK_FLOOR_S
from hitrate.store.cost import UsageTotals, aggregate, cost
from hitrate.store.ledger import Ledger
from hitrate.store.prices import ModelPrice, PriceTable, UnknownModelError
from hitrate.store.records import CallRecord

Provider = Literal["anthropic", "openai", "deepseek", "gemini", "local"]
_MECHANISMS: dict[str, tuple[str, ...]] = {
    "anthropic": ("anthropic_breakpoints",),
    "openai": ("openai_automatic_prefix", "openai_breakpoints"),
    "deepseek": ("deepseek_prefix_units",),
    "gemini": ("gemini_implicit",),
}
# Where the price table states no minimum, the lowest minimum the provider documents for any
# current model: a replay then errs towards caching rather than towards a miss it cannot justify.
_FALLBACK_MIN_TOKENS: dict[str, int] = {
    "anthropic_breakpoints": 512,
    "openai_automatic_prefix": 1024,
    "openai_breakpoints": 1024,
    "gemini_implicit": 1024,
}


class WhatIfError(ValueError):
    """The what-if cannot run as asked (unknown target, requests without section facts, ...)."""


class Target(BaseModel):
    """Whose cache rules and prices to replay through."""

    model_config = ConfigDict(frozen=True)

    provider: Provider
    model: str | None = None
    """The price-table model (None for `local`)."""
    mechanism: str
    """The price table's cache mechanism for the model ("local_radix" for the local engine)."""
    min_cacheable_tokens: int = 0
    granularity: int = 1
    retention: Literal["in_memory", "24h"] | None = None
    """OpenAI: the only prompt-cache retention the model accepts (gpt-5.5: 24h), else None."""

    @property
    def label(self) -> str:
        return self.provider if self.model is None else f"{self.provider}/{self.model}"


def parse_target(spec: str, table: PriceTable | None = None) -> Target:
    """`anthropic/<model>`, `openai/<model>`, `deepseek/<model>`, `gemini/<model>` or `local`."""
    table = table or PriceTable.default()
    provider, _, model = spec.strip().partition("/")
    provider = provider.lower()
    if provider == "local":
        return Target(provider="local", model=model or None, mechanism="local_radix")
    if provider not in _MECHANISMS:
        raise WhatIfError(f"unknown provider {provider!r} in {spec!r}: use anthropic/, openai/, deepseek/, gemini/<model> or local")
    if not model:
        raise WhatIfError(f"{spec!r} names no model: write {provider}/<model>, e.g. {_example(table, provider)}")
    try:
        entry = table.lookup(model)
    except UnknownModelError as exc:
        raise WhatIfError(str(exc)) from exc
    if entry.cache_mechanism not in _MECHANISMS[provider]:
        raise WhatIfError(f"{entry.model} is a {entry.provider} model ({entry.cache_mechanism}); use --as {entry.provider}/{entry.model}")
    return Target(
        provider=provider,  # type: ignore[arg-type]
        model=entry.model,
        mechanism=entry.cache_mechanism,
        min_cacheable_tokens=_min_tokens(entry),
        granularity=entry.hit_granularity_tokens or _family_granularity(entry.cache_mechanism),
        retention=entry.cache_retention,
    )


def _family_granularity(mechanism: str) -> int:
    """The family's own hit step where the price table states none: OpenAI's automatic prefix cache
    returns hits in 128-token steps on every model up to GPT-5.5, gpt-5.5 included."""
    family = family_of_mechanism(mechanism)
    return CacheRules(family=family).prefix_granularity if family is not None else 1


def _min_tokens(entry: ModelPrice) -> int:
    if entry.min_cacheable_tokens is not None:
        return entry.min_cacheable_tokens
    return _FALLBACK_MIN_TOKENS.get(entry.cache_mechanism, 0)


def _example(table: PriceTable, provider: str) -> str:
    names = [m.model for m in table.models if m.provider == provider]
    return f"{provider}/{names[0]}" if names else f"{provider}/<model>"


class WhatIfOptions(BaseModel):
    """Knobs of a replay. Each applies to the mechanisms named in its description."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttl: Literal["5m", "1h"] = "5m"
    """Anthropic: TTL of every planned mark."""
    marks: Literal["auto", "planned", "recorded"] = "auto"
    """Anthropic, OpenAI >= 5.6: plan marks as the projection does, or use the recorded ones.
    auto: the recorded ones where the requests carried marks or came from a layout that places none
    on purpose (naive), so a run is replayed as it was sent; planned for runs on backends that take
    no marks (their requests could not carry any), or when `ttl` asks for 1h marks."""
    naive: bool = False
    """Replay the same content assembled naively (volatile head, no marks)."""
    volatility: Volatility = "context"
    """With `naive`: the head changes when the dynamic context changes, or on every request."""
    retention: Literal["in_memory", "24h"] = "in_memory"
    """OpenAI <= 5.5: in-memory (5 min idle, 1 h cap) or extended 24 h retention."""
    idle_s: float | None = Field(None, gt=0)
    """OpenAI <= 5.5 / Gemini: override the idle expiry (in-memory retention is 5-10 minutes)."""
    deepseek_retention_s: float = Field(float(DEEPSEEK_FLOOR_S), gt=0)
    """DeepSeek: how long an unused unit survives."""
    pool_tokens: int = Field(1_000_000, ge=1)
    """Local: KV pool size in tokens."""
    page_size: int = Field(1, ge=1)
    """Local: tokens per KV page."""
    calibrate: bool = True
    """Scale the projection's token estimates so that the recorded requests' prompts add up to the
    provider-reported prompt tokens (one factor for the whole replay, so shared prefixes stay equal)."""


class WhatIfResult(BaseModel):
    """Predicted and actual buckets and cost, per request and in total."""

    target: str
    options: WhatIfOptions
    calls: list[SimCall]
    predicted: UsageTotals
    actual: UsageTotals
    token_scale: float = 1.0
    """Factor applied to the section token estimates (1.0 when not calibrated)."""
    notes: list[str] = []

    @property
    def saving_usd(self) -> float | None:
        if self.predicted.cost_usd is None or self.actual.cost_usd is None:
            return None
        return self.actual.cost_usd - self.predicted.cost_usd


def resolved_marks(requests: Sequence[SimRequest], options: WhatIfOptions) -> Literal["planned", "recorded"]:
    """Which marks a replay uses: `options.marks`, with "auto" decided by the requests."""
    if options.marks != "auto":
        return options.marks
    if options.ttl != "5m":
        return "planned"  # asking how marks of another TTL would do: recorded marks keep theirs
    carried = any(section.marks for r in requests for section in r.sections)
    naive = bool(requests) and all(r.layout == "naive" for r in requests)
    return "recorded" if carried or naive else "planned"


def simulate(requests: Sequence[SimRequest], target: Target, options: WhatIfOptions = WhatIfOptions()) -> list[Predicted]:
    """Per-request predicted buckets under the target's cache rules (no prices)."""
    marks = resolved_marks(requests, options)
    if options.naive:
        requests = naive_requests(requests, options.volatility)
    mechanism = target.mechanism
    if mechanism == "anthropic_breakpoints":
        config = AnthropicSimConfig(
            min_cacheable_tokens=target.min_cacheable_tokens,
            head_ttl=options.ttl,
            message_ttl=options.ttl,
            # Naive assembly places no marks: replay the (now empty) recorded ones.
            marks="recorded" if options.naive else marks,
        )
        return simulate_anthropic(requests, config)
    if mechanism == "openai_breakpoints":
        marks = "recorded" if options.naive else marks
        return simulate_openai_breakpoints(requests, BreakpointSimConfig(min_tokens=target.min_cacheable_tokens, marks=marks))
    if mechanism in ("openai_automatic_prefix", "gemini_implicit"):
        overrides: dict[str, object] = {"min_tokens": target.min_cacheable_tokens, "granularity": target.granularity}
        if options.idle_s is not None:
            overrides["idle_s"] = options.idle_s
        # A model that accepts only one retention setting is replayed with it, whatever was asked.
        retention = target.retention or options.retention
        return simulate_prefix_cache(requests, PrefixSimConfig.retention(retention, **overrides))
    if mechanism == "deepseek_prefix_units":
        return simulate_deepseek(requests, DeepSeekSimConfig(retention_s=options.deepseek_retention_s))
    if mechanism == "local_radix":
        return simulate_local(requests, LocalSimConfig(pool_tokens=options.pool_tokens, page_size=options.page_size))
    raise WhatIfError(f"no simulator for cache mechanism {mechanism!r}")


def whatif(
    requests: Sequence[SimRequest],
    target: Target,
    options: WhatIfOptions = WhatIfOptions(),
    table: PriceTable | None = None,
) -> WhatIfResult:
    """Replay `requests` through `target`'s cache and prices; totals next to the actual ones."""
    if not requests:
        raise WhatIfError("no requests to replay")
    table = table or PriceTable.default()
    notes: list[str] = []
    scale = 1.0
    if options.calibrate:
        requests, scale = calibrate(requests)
        if scale != 1.0:
            notes.append(f"section token estimates scaled by {scale:.3f} to match the provider-reported prompts")
    predictions = simulate(requests, target, options)
    calls = []
    for p in predictions:
        predicted_cost = None
        if target.model is not None:
            predicted_cost = cost(p.usage, target.model, p.request.started_at, table).total
        calls.append(
            SimCall(
                request_id=p.request.id,
                session_id=p.request.session_id,
                started_at=p.request.started_at,
                predicted=p.usage,
                predicted_cost_usd=predicted_cost,
                actual=p.request.actual,
                actual_cost_usd=p.request.actual_cost_usd,
                note=p.note,
            )
        )
    if target.model is None:
        notes.append("local engine: no price, tokens only")
    if options.naive:
        notes.append(f"naive assembly: dynamic context in the system prompt (head changes per {options.volatility}), no marks")
    elif (
        resolved_marks(requests, options) == "recorded"
        and target.mechanism in ("anthropic_breakpoints", "openai_breakpoints")
        and not any(section.marks for r in requests for section in r.sections)
    ):
        if all(r.layout == "naive" for r in requests):
            notes.append("the naive layout placed no cache marks, so nothing is cached, as the run was sent; "
                         "--marks planned places them as the projection would")
        else:
            notes.append("no request carried a cache mark (its backend takes none), so --marks recorded caches nothing; "
                         "--marks planned places them as the projection would")
    actual = aggregate((c.actual, c.actual_cost_usd) for c in calls if c.actual is not None)
    return WhatIfResult(
        target=target.label,
        options=options,
        calls=calls,
        predicted=aggregate((c.predicted, c.predicted_cost_usd) for c in calls),
        actual=actual,
        token_scale=scale,
        notes=notes,
    )


def calibrate(requests: Sequence[SimRequest]) -> tuple[list[SimRequest], float]:
    """Scale section tokens by Σ reported prompt / Σ estimated prompt over the requests that have
    both. Cumulative prefix lengths are scaled and rounded, then differenced, so every request
    that shares a section also shares its scaled prefix length."""
    reported = estimated = 0
    for r in requests:
        if r.actual is not None and r.actual.prompt_tokens is not None and r.token_ids is None:
            reported += r.actual.prompt_tokens
            estimated += r.prompt_tokens
    if not reported or not estimated or reported == estimated:
        return list(requests), 1.0
    factor = reported / estimated
    out = []
    for r in requests:
        if r.token_ids is not None:
            out.append(r)
            continue
        sections = []
        before_est = 0
        before_scaled = 0
        for s in r.sections:
            end_est = before_est + s.tokens
            end_scaled = round(end_est * factor)
            tokens = end_scaled - before_scaled
            blocks = tuple(round(b * factor) for b in s.block_tokens)
            sections.append(s.model_copy(update={"tokens": tokens, "block_tokens": blocks}))
            before_est, before_scaled = end_est, end_scaled
        out.append(r.model_copy(update={"sections": tuple(sections)}))
    return out, factor


# ---- from the ledger --------------------------------------------------------------------------


def request_from_call(call: CallRecord) -> SimRequest:
    """A ledger call as a replayable request (it must have been recorded with its sections)."""
    if call.sections is None:
        raise WhatIfError(f"call {call.id} was recorded without per-section token counts")
    return SimRequest(
        id=call.id,
        session_id=call.session_id,
        model=call.model,
        started_at=call.started_at,
        ttft_s=call.ttft_s,
        latency_s=call.latency_s,
        # The stored sections are the cache's own view of the request (see harness.call_sections).
        sections=tuple(SimSection.model_validate(s.model_dump()) for s in call.sections),
        output_tokens=call.usage.output or 0,
        actual=call.usage,
        actual_cost_usd=call.cost_usd,
        layout=call.layout,
    )


class LoadedRequests(BaseModel):
    scope: str
    """"run <id>", "session <id>" or "task <id>"."""
    requests: list[SimRequest]
    skipped: list[str] = []
    """Why some recorded calls were left out."""


def load_requests(ledger: Ledger, ident: str) -> LoadedRequests:
    """The calls of a run, else a session, else a task with this id, as replayable requests."""
    for scope in ("run", "session", "task"):
        calls = ledger.calls(**{f"{scope}_id": ident})
        if calls:
            break
    else:
        raise WhatIfError(f"no calls recorded under run, session or task id {ident!r} in {ledger.path}")
    skipped: list[str] = []
    failed = [c for c in calls if c.error is not None]
    if failed:
        skipped.append(f"{len(failed)} failed call(s) left out (no response, nothing cached)")
    usable = [c for c in calls if c.error is None]
    missing = [c for c in usable if c.sections is None]
    if missing:
        raise WhatIfError(
            f"{len(missing)} of {len(usable)} calls of {scope} {ident} have no per-section token counts "
            "(recorded before the ledger stored them); a what-if needs them"
        )
    return LoadedRequests(scope=f"{scope} {ident}", requests=[request_from_call(c) for c in usable], skipped=skipped)
