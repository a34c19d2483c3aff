"""Anthropic's prompt cache: explicit `cache_control` marks, a ~20-position lookback, 5m / 1h TTLs.

Rules (provider-semantics §2, §10):
- entries are written at cache marks (at most 4 per request), and only where the prefix reaches
  the model's minimum cacheable length: a shorter mark is silently ignored;
- each mark looks back `lookback` (about 20) block positions for the longest live entry; a run
  of tool_use blocks, or of tool_result blocks, is one position (the recorded positions already
  collapse them);
- an entry lives `ttl` from the *start* of the request that wrote it; a read sets its expiry to
  max(old, start of the reading request + ttl), at no cost;
- an entry becomes readable only once the writing request's first token has streamed
  (start + TTFT): parallel identical requests all pay in full;
- billing with mixed TTLs: A = the hit, B = the last 1h mark after A (else A), C = the last
  mark: read A, 1h write B - A, 5m write C - B, fresh input after C;
- caches are per model: a model switch misses even if the bytes agree.

Marks are either planned (`marks.plan_marks`: head, newest, a bridge on the previous request's end
when the turn added more positions than the lookback reaches) or taken from the request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hitrate.projection.caching.family import CacheFamily, Entry, Outcome, Reach
from hitrate.projection.caching.marks import plan_marks
from hitrate.projection.caching.requests import Boundary, CacheRequest, boundaries, head_sections
from hitrate.projection.caching.rules import CacheRules
from hitrate.projection.caching.ttl import TTL_SECONDS, Lifetime, shortest, ttl_seconds

AnthropicTTL = Literal["5m", "1h"]
ANTHROPIC_TTLS: tuple[str, ...] = ("5m", "1h")


@dataclass(frozen=True, slots=True)
class BillSplit:
    """Billed token counts of one request: read, 1h write, 5m write, fresh input."""

    read: int
    write_1h: int
    write_5m: int
    fresh: int


def bill_split(prompt_tokens: int, marks: Sequence[tuple[int, str]], hit_tokens: int) -> BillSplit:
    """Billed buckets of a request with cache marks.

    `marks` are (prefix length in tokens, TTL) in prompt order; `hit_tokens` is the length of the
    longest live cached prefix found (0 for none). Anthropic's rule for mixed TTLs uses three
    positions: A = the hit, B = the last 1h mark after A (else A), C = the last mark. It bills a read
    for A, a 1h write for B - A, a 5m write for C - B, and the tokens after C as fresh input.
    """
    positions = [p for p, _ in marks]
    if positions != sorted(positions) or len(set(positions)) != len(positions):
        raise ValueError(f"breakpoints must be in increasing prompt order, got {positions}")
    seen_5m = False
    for position, ttl in marks:
        if ttl == "5m":
            seen_5m = True
        elif seen_5m:
            raise ValueError(f"a 1h breakpoint (at {position}) may not follow a 5m one: 1h entries come first")
    if positions and positions[-1] > prompt_tokens:
        raise ValueError(f"breakpoint at {positions[-1]} lies beyond the prompt ({prompt_tokens} tokens)")
    last = positions[-1] if positions else 0
    if not 0 <= hit_tokens <= last:
        raise ValueError(f"a cache hit of {hit_tokens} tokens needs a breakpoint at or after it (last: {last})")
    a = hit_tokens
    b = max([p for p, ttl in marks if ttl == "1h" and p > a], default=a)
    c = max(last, a)
    return BillSplit(read=a, write_1h=b - a, write_5m=c - b, fresh=prompt_tokens - c)


def within_lookback(mark_position: int, entry_position: int, lookback: int) -> bool:
    """Whether a mark at `mark_position` finds an entry ending at `entry_position`."""
    return 0 <= mark_position - entry_position <= lookback


class AnthropicSimConfig(BaseModel):
    """How to replay requests through Anthropic's cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_cacheable_tokens: int = Field(ge=0)
    """The target model's minimum: a mark whose prefix is shorter writes nothing."""
    head_ttl: AnthropicTTL = "5m"
    """TTL of the mark on the static head (tools + system + docs)."""
    message_ttl: AnthropicTTL = "5m"
    """TTL of marks on messages. Never longer than head_ttl: 1h entries must come first."""
    lookback: int = Field(20, ge=1)
    """Block positions a mark searches backwards for an existing entry."""
    max_marks: int = Field(4, ge=1, le=4)
    marks: Literal["planned", "recorded"] = "planned"
    """planned: place marks as the projection does; recorded: use the marks each request carried
    (a recorded TTL other than 5m / 1h is replaced by message_ttl)."""

    @model_validator(mode="after")
    def _ttl_order(self) -> "AnthropicSimConfig":
        if TTL_SECONDS[self.message_ttl] > TTL_SECONDS[self.head_ttl]:
            raise ValueError("message_ttl longer than head_ttl: Anthropic requires 1h entries before 5m entries")
        return self

    @property
    def rules(self) -> CacheRules:
        return CacheRules(
            family="anthropic",
            min_cacheable_tokens=self.min_cacheable_tokens,
            head_ttl=self.head_ttl,
            message_ttl=self.message_ttl,
            lookback=self.lookback,
            max_marks=self.max_marks,
        )


@dataclass
class _Entry:
    tokens: int
    ttl_s: float
    expiry: float
    readable_at: float


@dataclass(frozen=True)
class _Mark:
    at: int
    """Index into the request's boundaries."""
    ttl: str


class AnthropicCache:
    """One account's Anthropic cache; `step` replays requests in start order."""

    def __init__(self, config: AnthropicSimConfig) -> None:
        self.config = config
        self._rules = config.rules
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._previous_end: dict[str | None, str] = {}
        """Per session: key of the boundary where the previous request put its newest mark."""

    def step(self, request: CacheRequest) -> Outcome:
        cfg = self.config
        t = request.t
        bounds = boundaries(request)
        marks = self._marks(request, bounds)
        eligible = [m for m in marks if bounds[m.at].tokens >= cfg.min_cacheable_tokens]

        hit, hit_key, reason = self._lookup(request.model, bounds, eligible, t)
        split = bill_split(request.prompt_tokens, _dedupe([(bounds[m.at].tokens, m.ttl) for m in eligible]), hit)

        # A read refreshes the entry it read and every live entry at this request's marks below it.
        if hit_key is not None:
            self._refresh((request.model, hit_key), t)
        for m in eligible:
            b = bounds[m.at]
            if b.tokens <= hit:
                self._refresh((request.model, b.key), t)
            else:
                self._write((request.model, b.key), b.tokens, m.ttl, t, t + request.first_token_delay)
        if marks:
            self._previous_end[request.session_id] = bounds[marks[-1].at].key

        note = reason
        if len(eligible) < len(marks):
            note += f"; {len(marks) - len(eligible)} mark(s) below the {cfg.min_cacheable_tokens}-token minimum"
        writes = {"5m": split.write_5m, "1h": split.write_1h}
        return Outcome(read=split.read, fresh=split.fresh, writes=writes, note=note)

    # ---- marks -------------------------------------------------------------------------------

    def _marks(self, request: CacheRequest, bounds: list[Boundary]) -> list[_Mark]:
        if self.config.marks == "recorded":
            return self._recorded_marks(request, bounds)
        previous_key = self._previous_end.get(request.session_id)
        previous = [i for i, b in enumerate(bounds) if b.key == previous_key][:1]
        plan = plan_marks(bounds, head_sections(request), previous, self._rules)
        return [_Mark(m.at, m.ttl) for m in plan.marks]

    def _recorded_marks(self, request: CacheRequest, bounds: list[Boundary]) -> list[_Mark]:
        index = {(b.section, b.block): i for i, b in enumerate(bounds)}
        marks = []
        for si, section in enumerate(request.sections):
            for mark in section.marks:
                ttl = mark.ttl if mark.ttl in ANTHROPIC_TTLS else self.config.message_ttl
                marks.append(_Mark(index[(si, mark.block)], ttl))
        marks.sort(key=lambda m: m.at)
        if len(marks) > self.config.max_marks:
            raise ValueError(
                f"request {request.id} carries {len(marks)} cache marks; Anthropic accepts at most "
                f"{self.config.max_marks} (replay with planned marks instead)"
            )
        return marks

    # ---- cache -------------------------------------------------------------------------------

    def _lookup(self, model: str, bounds: list[Boundary], marks: list[_Mark], t: float) -> tuple[int, str | None, str]:
        """Longest live, readable entry within lookback reach of any mark, and a reason label."""
        best, best_key = 0, None
        expired = pending = False
        lookback = self.config.lookback
        reachable: set[int] = set()
        for mark in marks:
            top = bounds[mark.at].position
            i = mark.at
            while i >= 0 and within_lookback(top, bounds[i].position, lookback):
                reachable.add(i)
                i -= 1
        for i in reachable:
            b = bounds[i]
            entry = self._entries.get((model, b.key))
            if entry is None:
                continue
            if entry.expiry <= t:
                expired = True
            elif entry.readable_at > t:
                pending = True
            elif b.tokens > best:
                best, best_key = b.tokens, b.key
        if best:
            return best, best_key, f"read {best}"
        if pending:
            return 0, None, "miss: entry not readable yet (its writer had not started streaming)"
        if expired:
            return 0, None, "miss: ttl_expired"
        out_of_reach = any(i not in reachable and self._live((model, b.key), t) for i, b in enumerate(bounds))
        if out_of_reach:
            return 0, None, "miss: lookback_exceeded"
        return 0, None, "miss: cold" if marks else "miss: no cacheable mark"

    def _live(self, key: tuple[str, str], t: float) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.readable_at <= t < entry.expiry

    def _refresh(self, key: tuple[str, str], t: float) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.readable_at <= t < entry.expiry:
            entry.expiry = max(entry.expiry, t + entry.ttl_s)

    def _write(self, key: tuple[str, str], tokens: int, ttl: str, t: float, readable_at: float) -> None:
        ttl_s = float(TTL_SECONDS[ttl])
        entry = self._entries.get(key)
        if entry is not None and entry.expiry > t:
            # Written again while still alive (e.g. by a parallel request): one entry, the longer
            # life, readable as soon as either writer streams.
            entry.expiry = max(entry.expiry, t + ttl_s)
            entry.readable_at = min(entry.readable_at, readable_at)
            entry.ttl_s = max(entry.ttl_s, ttl_s)
            return
        self._entries[key] = _Entry(tokens, ttl_s, t + ttl_s, readable_at)


def _dedupe(marks: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """Marks at the same prefix length write one entry; keep the longer TTL."""
    out: list[tuple[int, str]] = []
    for tokens, ttl in sorted(marks, key=lambda m: m[0]):
        if out and out[-1][0] == tokens:
            if TTL_SECONDS[ttl] > TTL_SECONDS[out[-1][1]]:
                out[-1] = (tokens, ttl)
            continue
        out.append((tokens, ttl))
    return out


def marked_entries(request: CacheRequest) -> list[Entry]:
    """The entries a request's own marks write (before any minimum is applied)."""
    bounds = boundaries(request)
    index = {(b.section, b.block): b for b in bounds}
    out = []
    for si, section in enumerate(request.sections):
        for mark in section.marks:
            b = index[(si, mark.block)]
            out.append(Entry(si, mark.block, b.tokens, b.position, float(ttl_seconds(mark.ttl)), mark.ttl))
    return out


def marked_cacheable(request: CacheRequest, minimum: int) -> int:
    """What a request with marks can cache: the prefix through its last mark, if above the minimum."""
    tokens = max((e.tokens for e in marked_entries(request)), default=0)
    return tokens if tokens >= minimum else 0


class AnthropicFamily(CacheFamily):
    name: ClassVar = "anthropic"

    def cache(self, *, marks: Literal["planned", "recorded"] = "recorded") -> AnthropicCache:
        r = self.rules
        assert r.head_ttl is not None and r.message_ttl is not None
        return AnthropicCache(
            AnthropicSimConfig(
                min_cacheable_tokens=r.min_cacheable_tokens,
                head_ttl=r.head_ttl,  # type: ignore[arg-type]
                message_ttl=r.message_ttl,  # type: ignore[arg-type]
                lookback=r.lookback,
                max_marks=max(1, min(4, r.max_marks)),
                marks=marks,
            )
        )

    def entries_left(self, request: CacheRequest, request_ends: Sequence[int]) -> list[Entry]:
        return marked_entries(request)

    def reach(self, entry: Entry, request: CacheRequest) -> Reach:
        marks = marked_entries(request)
        if any(within_lookback(m.position, entry.position, self.rules.lookback) for m in marks):
            return "ok"
        return "breakpoint_budget" if len(marks) >= self.rules.max_marks else "lookback_exceeded"

    def cacheable(self, request: CacheRequest) -> int:
        return marked_cacheable(request, self.rules.min_cacheable_tokens)

    def lifetime(self, ttl_class: str | None = None, write_ttls: Sequence[str] = ()) -> Lifetime:
        # The lifetime counts from the *start* of the request that wrote or read the entry, and a
        # read refreshes it for free: anchoring on the last call's start time is exact. Without a
        # write seen (e.g. the first call of a resumed session only read), assume the shortest
        # class the model has: never show warm when the entry may be gone.
        chosen = ttl_class or shortest(tuple(write_ttls) or ("5m",))
        seconds = float(ttl_seconds(chosen))
        return Lifetime(label=chosen, guaranteed_s=seconds, longest_s=seconds, refreshed_by_any_call=False)
