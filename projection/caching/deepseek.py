"""DeepSeek's on-disk context cache ("cache prefix units").

Rules (provider-semantics §4, §10):
- a request saves a unit at the end of its input, and another at the end of its output (the
  input plus the reply, which the next turn of the conversation re-sends as history);
- when a request shares a prefix with an earlier one, that common prefix is saved as a unit too;
- a request hits only a unit it *fully* contains as its prefix, and reads the longest such unit:
  after A+B, a request for A+C reads nothing (A+C does not contain A+B) but saves A as the
  common prefix, so a later A+D reads A;
- writes are free; the hit costs about 2-3% of the miss price (the price table has the rates,
  with peak / off-peak by the request's UTC time);
- units are best-effort and kept for hours; the replay keeps them `retention_s`.
Fixed-interval units inside long inputs are not modelled: their interval is not documented,
and they would contradict the A+C example above for a long A.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from hitrate.projection.caching.family import CacheFamily, Entry, Outcome
from hitrate.projection.caching.requests import CacheRequest, section_ends
from hitrate.projection.caching.rules import DEEPSEEK_FLOOR_S
from hitrate.projection.caching.ttl import Lifetime

# "Cleared after hours to days", best effort: an hour is the floor that wording gives. Every request
# saves its units for free, so any call refreshes them.
DEEPSEEK_UNITS = Lifetime(label="hours, best effort", guaranteed_s=DEEPSEEK_FLOOR_S, longest_s=None, refreshed_by_any_call=True)


class DeepSeekSimConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    retention_s: float = Field(float(DEEPSEEK_FLOOR_S), gt=0)
    """How long a unit survives after it was last saved or read (hours to days, best effort)."""
    min_unit_tokens: int = Field(64, ge=0)
    """Units shorter than this are not kept (the older docs' 64-token storage unit)."""


@dataclass
class _Unit:
    tokens: int
    ready_at: float
    last_used: float


class DeepSeekCache:
    """One account's DeepSeek prefix units; `step` replays requests in start order."""

    def __init__(self, config: DeepSeekSimConfig) -> None:
        self.config = config
        self._units: dict[tuple[str, str], _Unit] = {}
        self._seen: dict[tuple[str, str], float] = {}
        """Section ends of earlier requests (to detect common prefixes) -> when last sent."""
        self._pending_output: dict[tuple[str, str], float] = {}
        """Input-end key of a request whose reply has not been seen re-sent yet -> when it ended."""

    def _save(self, key: tuple[str, str], tokens: int, ready_at: float) -> None:
        if tokens < self.config.min_unit_tokens:
            return
        unit = self._units.get(key)
        if unit is not None and unit.last_used + self.config.retention_s > ready_at:
            unit.ready_at = min(unit.ready_at, ready_at)
            unit.last_used = max(unit.last_used, ready_at)
        else:
            self._units[key] = _Unit(tokens, ready_at, ready_at)

    def step(self, request: CacheRequest) -> Outcome:
        cfg = self.config
        t = request.t
        model = request.model
        ends = list(section_ends(request))

        # The reply of an earlier request becomes visible as a unit once a later request re-sends
        # it: the section right after that request's input is its output.
        for si, h, _ in ends[:-1]:
            ended = self._pending_output.pop((model, h), None)
            reply = request.sections[si + 1]
            # Without a recorded role, the history section right after a request's input is taken
            # to be its reply (that is how a conversation grows).
            if ended is not None and reply.kind == "history" and reply.role in (None, "assistant"):
                self._save((model, reply.hash), ends[si + 1][2], ended)

        hit, note = 0, "miss: no saved unit is a prefix of this request"
        for si, h, tokens in reversed(ends):
            unit = self._units.get((model, h))
            if unit is None:
                continue
            if unit.last_used + cfg.retention_s <= t:
                note = "miss: unit expired"
                continue
            if unit.ready_at > t:
                note = "miss: unit not saved yet"
                continue
            hit = tokens
            unit.last_used = t
            note = f"read {hit} (longest saved unit contained)"
            break

        # Common prefix with an earlier request: saved as a unit from now on.
        common = next(
            ((h, tokens) for _, h, tokens in reversed(ends) if self._seen.get((model, h), -1e18) + cfg.retention_s > t),
            None,
        )
        ready = t + request.first_token_delay
        if common is not None:
            self._save((model, common[0]), common[1], ready)
        if ends:
            _, last_hash, total = ends[-1]
            self._save((model, last_hash), total, ready)
            finished = t + (request.latency_s if request.latency_s is not None else request.first_token_delay)
            self._pending_output[(model, last_hash)] = finished
        for _, h, _ in ends:
            self._seen[(model, h)] = t
        return Outcome(read=hit, fresh=request.prompt_tokens - hit, note=note)


class DeepSeekFamily(CacheFamily):
    name: ClassVar = "deepseek"

    def cache(self) -> DeepSeekCache:
        return DeepSeekCache(DeepSeekSimConfig(retention_s=float(self.rules.implicit_ttl_seconds or DEEPSEEK_FLOOR_S)))

    def entries_left(self, request: CacheRequest, request_ends: Sequence[int]) -> list[Entry]:
        # Units are saved at the end of each request's input: earlier request ends and this one.
        ttl = float(self.rules.implicit_ttl_seconds or DEEPSEEK_FLOOR_S)
        ends = sorted(set(request_ends) | {len(request.sections) - 1})
        prefix = [t for _, _, t in section_ends(request)]
        return [Entry(si, -1, prefix[si], 0, ttl) for si in ends if si >= 0]

    def lifetime(self, ttl_class: str | None = None, write_ttls: Sequence[str] = ()) -> Lifetime:
        return DEEPSEEK_UNITS

    def warming_blocked(self) -> str | None:
        return "DeepSeek keeps prefix units on disk for hours to days: there is no TTL to beat"
