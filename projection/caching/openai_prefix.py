"""Automatic prefix caches with a clock: OpenAI up to GPT-5.5, and Gemini's implicit cache.

Rules (provider-semantics §3, §5, §10):
- every request of at least `min_tokens` leaves its prompt in the cache; writes are free;
- a later request reads the longest common prefix with a live earlier request, rounded down to
  `granularity` tokens (128 for OpenAI in-memory retention), and nothing below `min_tokens`;
- OpenAI in-memory retention: an entry is cleared after `idle_s` without use (5-10 minutes; the
  low end by default) and within `max_age_s` (1 hour) of being written; 24h retention keeps it a day;
- Gemini's implicit cache documents no lifetime at all: no clock, nothing to warm;
- requests are routed by a hash of their first ~256 tokens plus `prompt_cache_key`; the replay
  assumes every request reaches the same machine (an upper bound on hits).
The common prefix is found at section ends: two requests that agree on part of a section but not
all of it are counted as agreeing only up to the section before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from hitrate.projection.caching.family import CacheFamily, Outcome
from hitrate.projection.caching.requests import CacheRequest, section_ends
from hitrate.projection.caching.ttl import Lifetime

# OpenAI up to GPT-5.5, in-memory retention: cleared after 5-10 minutes idle. Every request writes
# the prefix for free, so any call refreshes it.
OPENAI_IN_MEMORY = Lifetime(label="5-10m idle", guaranteed_s=300, longest_s=600, refreshed_by_any_call=True)
OPENAI_IN_MEMORY_MAX_AGE_S = 3600.0
# Extended retention ("24h"): kept up to a day, with no documented floor beyond the in-memory one.
# Past the first minutes the state is unknown, not cold; there is nothing a warm-up could beat.
OPENAI_EXTENDED = Lifetime(label="up to 24h", guaranteed_s=300, longest_s=None, refreshed_by_any_call=True)
"""In-memory entries are gone within an hour of being written, however often they are read."""


def cached_tokens(shared_prefix_tokens: int, *, minimum: int, granularity: int | None) -> int:
    """Tokens an automatic-prefix cache returns for a prefix shared with a live earlier request:
    nothing below the model's minimum, and a multiple of its hit granularity (128 tokens for
    in-memory caching up to GPT-5.4) at most."""
    if shared_prefix_tokens < 0:
        raise ValueError("a shared prefix cannot be negative")
    if shared_prefix_tokens < minimum:
        return 0
    return shared_prefix_tokens - shared_prefix_tokens % granularity if granularity else shared_prefix_tokens


class PrefixSimConfig(BaseModel):
    """An automatic prefix cache: nothing to place, the layout alone decides."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_tokens: int = Field(1024, ge=0)
    """Shorter prompts are not cached, and shorter common prefixes are not read."""
    granularity: int = Field(128, ge=1)
    """Hits are rounded down to a multiple of this (OpenAI in-memory: 128; 1 = exact)."""
    idle_s: float = Field(OPENAI_IN_MEMORY.guaranteed_s, gt=0)
    """An entry unused this long is gone (OpenAI in-memory retention: 5-10 minutes)."""
    max_age_s: float = Field(OPENAI_IN_MEMORY_MAX_AGE_S, gt=0)
    """An entry is gone this long after it was written, however often it is read."""

    @classmethod
    def retention(cls, kind: Literal["in_memory", "24h"], **overrides: object) -> "PrefixSimConfig":
        """OpenAI's two retention settings: in-memory (5 min idle, 1 h cap) or extended (24 h)."""
        base: dict[str, object] = (
            {"idle_s": OPENAI_IN_MEMORY.guaranteed_s, "max_age_s": OPENAI_IN_MEMORY_MAX_AGE_S}
            if kind == "in_memory"
            else {"idle_s": 86400.0, "max_age_s": 86400.0}
        )
        return cls(**{**base, **overrides})


@dataclass
class _PrefixEntry:
    tokens: int
    written: float
    last_used: float
    readable_at: float


class PrefixCache:
    """One account's automatic prefix cache; `step` replays requests in start order."""

    def __init__(self, config: PrefixSimConfig) -> None:
        self.config = config
        self._entries: dict[tuple[str, str], _PrefixEntry] = {}

    def _alive(self, entry: _PrefixEntry, t: float) -> bool:
        cfg = self.config
        return t - entry.last_used < cfg.idle_s and t - entry.written < cfg.max_age_s

    def step(self, request: CacheRequest) -> Outcome:
        cfg = self.config
        t = request.t
        ends = list(section_ends(request))
        common, note = 0, "miss: cold"
        depth = -1
        for si, h, tokens in reversed(ends):
            entry = self._entries.get((request.model, h))
            if entry is None:
                continue
            if not self._alive(entry, t):
                note = "miss: expired (idle or past the retention cap)"
                continue
            if entry.readable_at > t:
                note = "miss: entry not ready (its writer had not started streaming)"
                continue
            common, depth = tokens, si
            break
        cached = cached_tokens(common, minimum=cfg.min_tokens, granularity=cfg.granularity)
        if cached:
            note = f"read {cached} of a {common}-token common prefix"
        elif common:
            note = f"miss: common prefix {common} below the {cfg.min_tokens}-token minimum"
        if request.prompt_tokens < cfg.min_tokens and not cached:
            note = f"miss: prompt below the {cfg.min_tokens}-token minimum"

        ready = t + request.first_token_delay
        cacheable = request.prompt_tokens >= cfg.min_tokens
        for si, h, tokens in ends:
            key = (request.model, h)
            entry = self._entries.get(key)
            if entry is not None and self._alive(entry, t):
                if si <= depth or cacheable:
                    entry.last_used = t
                continue
            if cacheable and tokens > 0:
                self._entries[key] = _PrefixEntry(tokens, t, t, ready)
        return Outcome(read=cached, fresh=request.prompt_tokens - cached, note=note)


class OpenAIImplicitFamily(CacheFamily):
    name: ClassVar = "openai_implicit"

    def cache(self) -> PrefixCache:
        r = self.rules
        idle = float(r.implicit_ttl_seconds or OPENAI_IN_MEMORY.guaranteed_s)
        return PrefixCache(
            PrefixSimConfig(
                min_tokens=r.min_cacheable_tokens,
                granularity=r.prefix_granularity,
                idle_s=idle,
                max_age_s=max(idle, OPENAI_IN_MEMORY_MAX_AGE_S),
            )
        )

    def warming_blocked(self) -> str | None:
        if self.rules.extended_retention:
            return "extended retention keeps the prefix for up to 24 hours: there is no short TTL to beat"
        return None

    def lifetime(self, ttl_class: str | None = None, write_ttls: Sequence[str] = ()) -> Lifetime:
        # The harness leaves `prompt_cache_retention` at the model's default: in-memory, except on
        # models that accept only extended retention.
        if self.rules.extended_retention:
            return OPENAI_EXTENDED
        idle = self.rules.implicit_ttl_seconds
        if idle and idle != OPENAI_IN_MEMORY.guaranteed_s:
            return OPENAI_IN_MEMORY.model_copy(update={"guaranteed_s": float(idle), "longest_s": max(float(idle), 600.0)})
        return OPENAI_IN_MEMORY


class GeminiFamily(CacheFamily):
    """Gemini's implicit cache: an automatic prefix cache whose lifetime is not documented."""

    name: ClassVar = "gemini"

    def cache(self) -> PrefixCache:
        # No documented lifetime: entries are kept unless the rules give one.
        r = self.rules
        forever = float(r.implicit_ttl_seconds) if r.implicit_ttl_seconds else float("inf")
        return PrefixCache(
            PrefixSimConfig(min_tokens=r.min_cacheable_tokens, granularity=r.prefix_granularity, idle_s=forever, max_age_s=forever)
        )

    def warming_blocked(self) -> str | None:
        return "Gemini's implicit cache documents no lifetime: a warm-up cannot be timed"

    def no_clock_reason(self) -> str | None:
        return "Gemini implicit cache has no documented TTL"

    def lifetime(self, ttl_class: str | None = None, write_ttls: Sequence[str] = ()) -> Lifetime | None:
        return None

