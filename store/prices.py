"""Absolute per-model prices and cache metadata, loaded from a dated, sourced snapshot.

Prices are USD per million tokens, stored per model (never one global read/write multiplier:
read discounts range from 0.5x to 0.025x of input across current models). A model carries one or
more schedules (a price change on a known date is a new schedule), each with tiers by prompt size
(the whole request moves to the higher tier: >100K Haiku 5.5, >200K Gemini Pro, >272K OpenAI)
and, for DeepSeek, separate peak-hour tiers chosen by the request's UTC time.

A snapshot's id is a hash of its canonical JSON, so a ledger row can name the exact prices it
was costed with and an old run can be re-priced with a newer snapshot.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from datetime import date, datetime, time, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Provider = Literal["anthropic", "openai", "deepseek", "gemini", "other"]
WriteTTL = Literal["5m", "30m", "1h", "12h"]
CacheMechanism = Literal[
    "anthropic_breakpoints",  # cache_control marks, 20-block lookback, 5m / 1h TTL
    "openai_automatic_prefix",  # up to GPT-5.5: automatic, free writes, 128-token steps
    "openai_breakpoints",  # GPT-5.6+: implicit/explicit breakpoints, exact match, 30m / 12h TTL
    "deepseek_prefix_units",  # persisted prefix units, free writes
    "gemini_implicit",  # implicit prefix caching (+ explicit CachedContent objects)
    "none",
]

SNAPSHOT_FILE = "prices_snapshot.json"


class UnknownModelError(KeyError):
    """The model is not in the price table. Its message names the closest known models."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown model"


class Tier(BaseModel):
    """Rates (USD per 1M tokens) for requests whose prompt exceeds `above_prompt_tokens`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    above_prompt_tokens: int = Field(0, ge=0)
    """The tier applies when the whole prompt (fresh + writes + reads) is larger than this."""
    input: float = Field(ge=0)
    """Base (uncached) input."""
    output: float = Field(ge=0)
    """Output, thinking included."""
    write_5m: float | None = Field(None, ge=0)
    """Cache write with a 5-minute TTL; None where the model has no such class."""
    write_30m: float | None = Field(None, ge=0)
    """Cache write with a 30-minute TTL (OpenAI GPT-5.6+)."""
    write_1h: float | None = Field(None, ge=0)
    """Cache write with a 1-hour TTL."""
    write_12h: float | None = Field(None, ge=0)
    """Cache write with a 12-hour TTL (OpenAI GPT-5.6+ extended retention)."""
    read: float | None = Field(None, ge=0)
    """Cache read; None where the model has no cache discount."""

    def rate_for(self, bucket: str) -> float | None:
        """The rate that bills a `Usage` bucket."""
        return {
            "fresh_input": self.input,
            "cache_write_5m": self.write_5m,
            "cache_write_30m": self.write_30m,
            "cache_write_1h": self.write_1h,
            "cache_write_12h": self.write_12h,
            "cache_read": self.read,
            "output": self.output,
        }[bucket]

    @property
    def label(self) -> str:
        return "base" if self.above_prompt_tokens == 0 else f">{_short_tokens(self.above_prompt_tokens)}"


class PeakHours(BaseModel):
    """Time-of-day pricing: during these UTC windows the peak tiers apply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    windows_utc: list[tuple[str, str]]
    """Half-open [start, end) windows as "HH:MM" in UTC ("24:00" ends one at midnight)."""
    weekdays_only: bool = True
    """Peak applies Monday to Friday only."""
    excluded_dates: list[date] = []
    """Dates (UTC) billed off-peak although they fall on a peak weekday (public holidays)."""
    tiers: list[Tier]
    """Peak-hour rates; the schedule's own tiers are the off-peak rates."""

    @field_validator("windows_utc")
    @classmethod
    def _valid_windows(cls, windows: list[tuple[str, str]]) -> list[tuple[str, str]]:
        for start, end in windows:
            if _parse_hhmm(start) >= _parse_hhmm(end):
                raise ValueError(f"peak window {start}-{end} must start before it ends")
        return windows

    def is_peak(self, at: datetime) -> bool:
        at = at.astimezone(timezone.utc)
        if self.weekdays_only and at.weekday() >= 5:
            return False
        if at.date() in self.excluded_dates:
            return False
        now = at.time()
        return any(_parse_hhmm(s) <= now < _parse_hhmm(e) for s, e in self.windows_utc)


class PriceModifier(BaseModel):
    """A multiplier on every token rate of a request (input, writes, reads, output), applied when the
    provider's usage says the request ran that way (Anthropic `usage.inference_geo: "us"`,
    `usage.speed: "fast"`). It stacks with the tier rates and the cache multipliers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    multiplier: float = Field(gt=0)
    source: str
    """URL of the page that states it."""
    as_of: date
    """When it was seen at the source."""
    confirmed: bool = True
    """False when the only source is third-party."""
    note: str = ""


class RequestFee(BaseModel):
    """A fee per server-side tool request, billed on top of the tokens (Anthropic web search)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    usd_per_request: float = Field(ge=0)
    source: str
    as_of: date
    note: str = ""


#: Service-tier names that mean the plain list prices (Anthropic "standard", OpenAI "default" / "auto").
STANDARD_SERVICE_TIERS: tuple[str, ...] = ("standard", "default", "auto")


def _ordered_tiers(tiers: list[Tier]) -> list[Tier]:
    if not tiers:
        raise ValueError("a schedule needs at least one tier")
    bounds = [t.above_prompt_tokens for t in tiers]
    if bounds[0] != 0 or bounds != sorted(set(bounds)):
        raise ValueError(f"tiers must start at 0 and increase strictly, got {bounds}")
    return tiers


class PriceSchedule(BaseModel):
    """The prices of one model over a span of dates, with where and when they were seen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    effective_from: date | None = None
    """First UTC date these prices apply (None: since before any other schedule)."""
    effective_until: date | None = None
    """First UTC date they no longer apply (None: still current)."""
    as_of: date
    """When the prices were seen at the source."""
    source: str
    """URL of the page (or file) the prices come from."""
    confirmed: bool = True
    """False when the only source is third-party or the value is marked UNCONFIRMED."""
    note: str = ""
    tiers: list[Tier]
    peak: PeakHours | None = None
    inference_geo: dict[str, PriceModifier] = {}
    """Rate multipliers by the geography the usage reports (the default geography, e.g. "global",
    is the plain rates and is not listed). A reported geography that is not listed leaves the call
    unpriced rather than guessed."""
    speed: dict[str, PriceModifier] = {}
    """Rate multipliers by the speed the usage reports ("standard" is the plain rates)."""
    server_tools: dict[str, RequestFee] = {}
    """Fees per server-tool request, keyed by the `Usage` count they bill (`web_search_requests`)."""
    service_tiers: dict[str, list[Tier]] = {}
    """Rates by the service tier the usage reports ("batch", "priority", "flex"); the schedule's
    own tiers are the standard tier. A reported tier that is not listed leaves the call unpriced."""
    service_tiers_source: str = ""
    """Where the service-tier rates come from (they may be dated apart from the list prices)."""

    @field_validator("tiers")
    @classmethod
    def _tiers_ordered(cls, tiers: list[Tier]) -> list[Tier]:
        return _ordered_tiers(tiers)

    @field_validator("service_tiers")
    @classmethod
    def _service_tiers_ordered(cls, tiers: dict[str, list[Tier]]) -> dict[str, list[Tier]]:
        for name, levels in tiers.items():
            if name in STANDARD_SERVICE_TIERS:
                raise ValueError(f"service tier {name!r} is the schedule's own rates; do not list it")
            _ordered_tiers(levels)
        return tiers

    def covers(self, day: date) -> bool:
        if self.effective_from is not None and day < self.effective_from:
            return False
        return self.effective_until is None or day < self.effective_until


class ModelPrice(BaseModel):
    """One model: its prices over time and the cache facts the harness plans around."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """Canonical model id as the provider's API names it."""
    provider: Provider
    aliases: list[str] = []
    """Other names billed as this model (dated ids, renamed ids, vendor-prefixed ids)."""
    writes_billed: bool
    """Whether cache writes cost more than plain input (Anthropic; OpenAI GPT-5.6+)."""
    write_ttls: list[WriteTTL] = []
    """TTL classes a write can have; empty where writes are free/implicit."""
    cache_mechanism: CacheMechanism
    min_cacheable_tokens: int | None = None
    """Prompts shorter than this are silently not cached; None when no source states it."""
    min_cacheable_note: str = ""
    hit_granularity_tokens: int | None = None
    """Cached prefixes are rounded down to a multiple of this (OpenAI in-memory caching: 128)."""
    cache_retention: Literal["in_memory", "24h"] | None = None
    """OpenAI: the only `prompt_cache_retention` the model accepts, where it accepts just one (gpt-5.5:
    24h, extended retention); None where the in-memory default applies."""
    storage_per_mtok_hour: float | None = None
    """Hourly rent of an explicit cache object (Gemini CachedContent), USD per 1M tokens."""
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    """The most tokens one reply may have (thinking included); None when no source states it."""
    thinks_by_default: bool = False
    """The model reasons before answering unless told not to (Claude 5 family, GPT-5.x, DeepSeek V4,
    Gemini 2.5 / 3): its thinking counts inside the output budget, so the default budget leaves room."""
    deprecation_date: date | None = None
    notes: str = ""
    schedules: list[PriceSchedule]

    @model_validator(mode="after")
    def _schedules_disjoint(self) -> ModelPrice:
        if not self.schedules:
            raise ValueError(f"{self.model}: at least one price schedule is needed")
        spans = sorted((s.effective_from or date.min, s.effective_until or date.max) for s in self.schedules)
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            if start < end:
                raise ValueError(f"{self.model}: price schedules overlap")
        return self

    def schedule_at(self, day: date) -> PriceSchedule | None:
        return next((s for s in self.schedules if s.covers(day)), None)

    @property
    def current(self) -> PriceSchedule:
        """The schedule with the latest start (what the table shows)."""
        return max(self.schedules, key=lambda s: s.effective_from or date.min)


class PriceSnapshot(BaseModel):
    """The file format of `prices_snapshot.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    as_of: date
    """Date the snapshot as a whole was assembled."""
    description: str = ""
    models: list[ModelPrice]


class RateSelection(BaseModel):
    """The rates that apply to one request, and why."""

    model_config = ConfigDict(frozen=True)

    model: str
    tier: Tier
    peak: bool | None
    """True/False for time-of-day priced models, None where time of day does not matter."""
    schedule: PriceSchedule


class PriceError(ValueError):
    """Prices exist for the model but cannot be applied to this request (date, tier)."""


class PriceTable:
    """Look-up over a `PriceSnapshot`: names (with aliases, vendor prefixes and dated suffixes)
    to model entries, and (model, time, prompt size) to the rates that apply."""

    def __init__(self, snapshot: PriceSnapshot) -> None:
        self.snapshot = snapshot
        self._exact: dict[str, ModelPrice] = {}
        for entry in snapshot.models:
            for name in (entry.model, *entry.aliases):
                key = name.strip().lower()
                other = self._exact.get(key)
                if other is not None and other is not entry:
                    raise ValueError(f"model name {name!r} is claimed by both {other.model} and {entry.model}")
                self._exact[key] = entry
        # Fallback keys (no vendor prefix, no date). Where two entries share one, e.g. a dated
        # snapshot priced differently from its undated name, the fallback is ambiguous and is
        # left out: only the exact names reach those entries.
        claims: dict[str, set[int]] = {}
        entries: dict[int, ModelPrice] = {}
        for key, entry in self._exact.items():
            claims.setdefault(canonical_model_name(key), set()).add(id(entry))
            entries[id(entry)] = entry
        self._canonical: dict[str, ModelPrice] = {
            key: entries[next(iter(ids))] for key, ids in claims.items() if len(ids) == 1
        }
        self.id = snapshot_id(snapshot)

    # ---- loading ---------------------------------------------------------------------------

    @classmethod
    def default(cls) -> PriceTable:
        """The snapshot shipped with hitrate."""
        return _default_table()

    @classmethod
    def from_json(cls, text: str) -> PriceTable:
        return cls(PriceSnapshot.model_validate_json(text))

    @classmethod
    def from_file(cls, path: str | Path) -> PriceTable:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, fixed separators): the bytes the id is the hash of."""
        return canonical_json(self.snapshot)

    # ---- models ----------------------------------------------------------------------------

    @property
    def as_of(self) -> date:
        return self.snapshot.as_of

    @property
    def models(self) -> list[ModelPrice]:
        return list(self.snapshot.models)

    def find(self, name: str) -> ModelPrice | None:
        """The entry billed for `name`, or None. Exact names and aliases first, then the name
        without a vendor prefix (`anthropic/`, `models/`, ...) or a dated suffix (`-20251001`,
        `-2025-04-14`, `@20251001`). Never a prefix or substring guess: `gpt-5.6-mini` does not
        match `gpt-5.6`."""
        return self._exact.get(name.strip().lower()) or self._canonical.get(canonical_model_name(name))

    def lookup(self, name: str) -> ModelPrice:
        entry = self.find(name)
        if entry is None:
            close = difflib.get_close_matches(canonical_model_name(name), sorted(self._exact), n=3)
            hint = f"; closest known: {', '.join(close)}" if close else ""
            raise UnknownModelError(f"no price for model {name!r} in snapshot {self.id}{hint}")
        return entry

    def writes_billed(self, name: str) -> bool:
        """Whether cache writes of `name` are billed (and reported) apart from plain input.
        For OpenAI this is the GPT-5.6 line: pass it to `from_openai_chat(writes_billed=...)`."""
        return self.lookup(name).writes_billed

    # ---- rates -----------------------------------------------------------------------------

    def rates_for(
        self, name: str, at: datetime, prompt_tokens: int | None, service_tier: str | None = None
    ) -> RateSelection:
        """The rates for one request of `name` started at `at` (timezone-aware) with a prompt of
        `prompt_tokens`, billed in `service_tier` (None or a standard name: the list prices).
        Raises `UnknownModelError` or `PriceError` when no price applies."""
        entry = self.lookup(name)
        at_utc = _require_aware(at)
        schedule = entry.schedule_at(at_utc.date())
        if schedule is None:
            raise PriceError(f"{entry.model} has no price in effect on {at_utc.date().isoformat()}")
        peak: bool | None = None
        tiers = schedule.tiers
        if service_tier is not None and service_tier not in STANDARD_SERVICE_TIERS:
            # A service tier has its own rates all day (no provider here combines one with peak hours).
            special = schedule.service_tiers.get(service_tier)
            if special is None:
                raise PriceError(f"{entry.model} has no price for service_tier={service_tier!r}")
            return RateSelection(model=entry.model, tier=select_tier(special, prompt_tokens), peak=None, schedule=schedule)
        if schedule.peak is not None:
            peak = schedule.peak.is_peak(at_utc)
            if peak:
                tiers = schedule.peak.tiers
        tier = select_tier(tiers, prompt_tokens)
        return RateSelection(model=entry.model, tier=tier, peak=peak, schedule=schedule)


def select_tier(tiers: list[Tier], prompt_tokens: int | None) -> Tier:
    """The highest tier whose threshold the prompt exceeds. With a single tier the prompt size
    does not matter; with several, an unknown prompt size is an error (no guessing)."""
    if len(tiers) == 1:
        return tiers[0]
    if prompt_tokens is None:
        raise PriceError("the prompt size is unknown, so the long-context tier cannot be chosen")
    chosen = tiers[0]
    for tier in tiers:
        if prompt_tokens > tier.above_prompt_tokens:
            chosen = tier
    return chosen


_PREFIXES = ("anthropic/", "openai/", "deepseek/", "gemini/", "google/", "models/")
_DATED = re.compile(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2})$")


def canonical_model_name(name: str) -> str:
    """Lower-case, without a vendor prefix or a trailing date; Anthropic's dotted versions
    (`claude-opus-4.5`) spelled with dashes as the API ids are (`claude-opus-4-5`)."""
    key = name.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                key, changed = key[len(prefix) :], True
    key = _DATED.sub("", key)
    if key.startswith("claude-"):
        key = key.replace(".", "-")
    return key


def canonical_json(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def snapshot_id(snapshot: PriceSnapshot) -> str:
    """`ps-` + the first 16 hex digits of the SHA-256 of the snapshot's canonical JSON."""
    return "ps-" + hashlib.sha256(canonical_json(snapshot).encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=1)
def _default_table() -> PriceTable:
    text = resources.files("hitrate.store").joinpath(SNAPSHOT_FILE).read_text(encoding="utf-8")
    return PriceTable.from_json(text)


def _require_aware(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"request time {at.isoformat()} has no timezone; prices by time of day need UTC")
    return at.astimezone(timezone.utc)


def _parse_hhmm(text: str) -> time:
    # "24:00" ends a window at midnight: the last instant of the day is still inside it.
    if text == "24:00":
        return time.max
    try:
        hours, minutes = text.split(":")
        return time(int(hours), int(minutes))
    except ValueError as exc:
        raise ValueError(f"bad time {text!r}, expected HH:MM or 24:00") from exc


def _short_tokens(n: int) -> str:
    return f"{n // 1000}K" if n % 1000 == 0 else str(n)
