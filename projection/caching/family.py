"""The protocol every cache family implements, and the outcome of stepping a cache with a request.

A family answers four questions, each in one place:

- `plan`: where this request's marks go (nothing for caches that need none);
- `cache()`: a fresh cache state; `state.step(request)` replays one request against it and returns
  read / written / fresh token counts with a note;
- `entries_left` and `reach`: which entries a request left behind, and whether a later request can
  reach each one with its marks (what the miss explainer asks to name a miss);
- `lifetime`: how long a written entry lives (the TTL clock, keep-alive); `warming_blocked`: why a
  warm-up can never pay for this family (None where it can).

Families count tokens and time only; prices stay in the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol

from hitrate.projection.caching.marks import MarkPlan, plan_marks
from hitrate.projection.caching.requests import Boundary, CacheRequest
from hitrate.projection.caching.rules import CacheRules, FamilyName
from hitrate.projection.caching.ttl import Lifetime

Reach = Literal["ok", "lookback_exceeded", "breakpoint_budget"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one request read, wrote and sent fresh, by a family's rules."""

    read: int
    fresh: int
    writes: dict[str, int] = field(default_factory=dict)
    """Tokens written per billed TTL class ("5m", "1h", "30m"); empty where writes are free."""
    note: str = ""

    @property
    def written(self) -> int:
        return sum(self.writes.values())


@dataclass(frozen=True, slots=True)
class Entry:
    """A cache entry a request left: where its prefix ends and how long it lives."""

    section: int
    block: int
    """Block within the section (-1: the section's end)."""
    tokens: int
    position: int
    ttl_s: float | None
    """None: no clock (kept until evicted)."""
    ttl_class: str | None = None
    """The mark's TTL class ("5m", "1h", "30m") for entries written at marks."""


class CacheState(Protocol):
    def step(self, request: CacheRequest) -> Outcome: ...


class CacheFamily(ABC):
    """Base class: the behaviour shared by families that cache prefixes on their own."""

    name: ClassVar[FamilyName]

    def __init__(self, rules: CacheRules) -> None:
        if rules.family != self.name:
            raise ValueError(f"{type(self).__name__} takes {self.name} rules, not {rules.family}")
        self.rules = rules

    def plan(self, bounds: Sequence[Boundary], head: frozenset[int], request_ends: Sequence[int]) -> MarkPlan:
        return plan_marks(bounds, head, request_ends, self.rules)

    @abstractmethod
    def cache(self) -> CacheState:
        """A fresh, empty cache (one account's worth) under these rules."""

    def entries_left(self, request: CacheRequest, request_ends: Sequence[int]) -> list[Entry]:
        """Entries `request` (and the earlier requests of its session, which ended at the section
        indices `request_ends`) left in the cache, before any minimum is applied."""
        # Automatic prefix caches match any prefix, in whole multiples of their granularity.
        g = self.rules.prefix_granularity
        ttl = self.rules.implicit_ttl_seconds
        out: list[Entry] = []
        total = 0
        position = 0
        for si, s in enumerate(request.sections):
            total += s.tokens
            position = s.positions[-1] if s.positions else position + (len(s.block_tokens) or (1 if s.tokens else 0))
            if s.tokens > 0:
                out.append(Entry(si, -1, (total // g) * g, position, float(ttl) if ttl else None))
        return out

    def reach(self, entry: Entry, request: CacheRequest) -> Reach:
        """Whether `request`'s marks can find `entry` (prefix caches need no marks)."""
        return "ok"

    def cacheable(self, request: CacheRequest) -> int:
        """Tokens of `request` that could be cached at all."""
        g = self.rules.prefix_granularity
        tokens = (request.prompt_tokens // g) * g
        return tokens if tokens >= self.rules.min_cacheable_tokens else 0

    def lifetime(self, ttl_class: str | None = None, write_ttls: Sequence[str] = ()) -> Lifetime | None:
        """How long the newest written entry lives; None where the family has no clock."""
        return None

    def no_clock_reason(self) -> str | None:
        """Why `lifetime` is None, in a few words; None where there is a clock."""
        return None

    def warming_blocked(self) -> str | None:
        """Why a keep-alive warm-up can never help this family; None where it can."""
        return None
