"""The knobs of one cache family for one model: which family, its minimum, mark budget, lookback,
TTLs and granularity. The per-model minimum comes from the caller's price table (store).

Family names (one vocabulary for the planner, explainer, simulator, clocks and keep-alive):

    anthropic           explicit `cache_control` marks with a ~20-position lookback
    openai_implicit     OpenAI up to GPT-5.5: automatic prefix cache, 128-token steps, 5-10 min idle
    openai_breakpoints  OpenAI GPT-5.6+: exact-match breakpoints, 30m minimum lifetime
    deepseek            DeepSeek's on-disk prefix units, hours to days, best effort
    gemini              Gemini's implicit cache: automatic prefix, no documented lifetime
    openai_compat       vLLM / SGLang / llama.cpp prefix caches: LRU, no TTL
    local               the bundled engine's radix cache: LRU, no TTL

The price table names the same caches "cache mechanisms"; `family_of_mechanism` maps them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hitrate.projection.caching.ttl import TTL_SECONDS

FamilyName = Literal["anthropic", "openai_implicit", "openai_breakpoints", "deepseek", "gemini", "openai_compat", "local"]
Ttl = Literal["5m", "1h", "30m"]

DEEPSEEK_FLOOR_S = 3600
"""DeepSeek documents units as "cleared after hours to days": one hour is the floor that gives."""

EXTENDED_RETENTION_S = 86400
"""OpenAI extended prompt-cache retention: prefixes "active for longer, up to a maximum of 24 hours"."""

OPENAI_SEARCHED_BREAKPOINTS = 50
"""OpenAI's prompt-caching guide: explicit breakpoints count "up to the latest 50" (checked 2026-12-01)."""

MARK_FAMILIES: tuple[str, ...] = ("anthropic", "openai_breakpoints")
"""Families whose entries exist only where a request put a mark."""

_MECHANISM_FAMILY: dict[str, FamilyName] = {
    "anthropic_breakpoints": "anthropic",
    "openai_automatic_prefix": "openai_implicit",
    "openai_breakpoints": "openai_breakpoints",
    "deepseek_prefix_units": "deepseek",
    "gemini_implicit": "gemini",
    "lru": "openai_compat",
    "local_radix": "local",
}


def family_of_mechanism(mechanism: str | None) -> FamilyName | None:
    """The family of a price-table cache mechanism (None for "none" and unknown ones)."""
    return _MECHANISM_FAMILY.get(mechanism or "")


class CacheRules(BaseModel):
    """How one provider / model caches prompts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: FamilyName
    min_cacheable_tokens: int = Field(default=0, ge=0)
    """Shortest prefix the model caches at all (Anthropic 512-4096 by model, OpenAI 1024)."""
    lookback: int = Field(default=20, ge=1)
    """Block positions a mark searches backwards for an existing entry (Anthropic)."""
    max_marks: int = Field(default=4, ge=0)
    """Most marks one request may carry (Anthropic) or write (OpenAI >= 5.6)."""
    searched_marks: int = Field(default=OPENAI_SEARCHED_BREAKPOINTS, ge=1)
    """Most recent marks in a conversation the provider searches (OpenAI >= 5.6)."""
    head_ttl: Ttl | None = None
    """TTL of the mark on the static head. Defaults: anthropic 5m, openai_breakpoints 30m."""
    message_ttl: Ttl | None = None
    """TTL of marks on messages. Must not exceed head_ttl (Anthropic: 1h entries before 5m ones)."""
    implicit_ttl_seconds: int | None = None
    """Expiry assumed for caches without marks. Defaults: openai_implicit 300 (in-memory retention
    is cleared after 5-10 idle minutes; the low end), deepseek 3600 (hours, best effort: an hour is
    the floor that wording gives); gemini / openai_compat / local: None (no clock)."""
    prefix_granularity: int = Field(default=1, ge=1)
    """Implicit hits are rounded down to a multiple of this (OpenAI <= 5.5: 128 tokens)."""
    extended_retention: bool = False
    """OpenAI automatic prefix cache with `prompt_cache_retention: 24h` (the only setting gpt-5.5
    accepts): prefixes are kept up to 24 hours instead of 5-10 idle minutes."""

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        family = data.get("family")
        if family == "anthropic":
            data.setdefault("head_ttl", "5m")
            data.setdefault("message_ttl", "5m")
        elif family == "openai_breakpoints":
            data.setdefault("head_ttl", "30m")
            data.setdefault("message_ttl", "30m")
        elif family == "openai_implicit":
            data.setdefault("implicit_ttl_seconds", EXTENDED_RETENTION_S if data.get("extended_retention") else 300)
            data.setdefault("prefix_granularity", 128)
        elif family == "deepseek":
            data.setdefault("implicit_ttl_seconds", DEEPSEEK_FLOOR_S)
        return data

    @model_validator(mode="after")
    def _ttls_fit_family(self) -> "CacheRules":
        allowed: dict[str, set[str | None]] = {
            "anthropic": {"5m", "1h"},
            "openai_breakpoints": {"30m"},
        }
        if self.extended_retention and self.family != "openai_implicit":
            raise ValueError("extended_retention is an OpenAI automatic-prefix (openai_implicit) setting")
        ok = allowed.get(self.family, {None})
        for name in ("head_ttl", "message_ttl"):
            if getattr(self, name) not in ok:
                raise ValueError(f"{self.family}: {name}={getattr(self, name)!r} not one of {sorted(map(str, ok))}")
        if self.head_ttl and self.message_ttl and TTL_SECONDS[self.message_ttl] > TTL_SECONDS[self.head_ttl]:
            raise ValueError("message_ttl longer than head_ttl: 1h entries must come before 5m entries")
        return self

    @property
    def places_marks(self) -> bool:
        return self.family in MARK_FAMILIES

    @property
    def uses_prompt_cache_key(self) -> bool:
        return self.family in ("openai_implicit", "openai_breakpoints")

