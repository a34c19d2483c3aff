"""Anthropic's prompt cache, replayed over recorded requests.

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
- caches are per model: a recorded model switch misses even if the bytes agree.

Marks are either planned the way the projection plans them (one on the static head, one on the
newest block, a bridge on the previous request's end when the turn added more positions than
the lookback reaches) or taken from the recording.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hitrate.evals.sim_types import HEAD_KINDS, Boundary, Predicted, SimRequest, billed, boundaries, in_order
from hitrate.store.cache_rules import anthropic_bill_split

AnthropicTTL = Literal["5m", "1h"]
TTL_S: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


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
        if TTL_S[self.message_ttl] > TTL_S[self.head_ttl]:
            raise ValueError("message_ttl longer than head_ttl: Anthropic requires 1h entries before 5m entries")
        return self


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


class AnthropicSimulator:
    """Replays requests in start order; one instance holds one account's cache."""

    def __init__(self, config: AnthropicSimConfig) -> None:
        self.config = config
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._previous_end: dict[str | None, str] = {}
        """Per session: key of the boundary where the previous request put its newest mark."""

    def run(self, requests: Sequence[SimRequest]) -> list[Predicted]:
        return [self.step(r) for r in in_order(requests)]

    def step(self, request: SimRequest) -> Predicted:
        cfg = self.config
        t = request.t
        bounds = boundaries(request)
        marks = self._marks(request, bounds)
        eligible = [m for m in marks if bounds[m.at].tokens >= cfg.min_cacheable_tokens]

        hit, hit_key, reason = self._lookup(request.model, bounds, eligible, t)
        split = anthropic_bill_split(
            request.prompt_tokens,
            _dedupe([(bounds[m.at].tokens, m.ttl) for m in eligible]),  # type: ignore[misc]
            hit,
        )

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
        usage = billed(
            split.fresh_input or 0,
            split.cache_read or 0,
            request.output_tokens,
            write_5m=split.cache_write_5m or 0,
            write_1h=split.cache_write_1h or 0,
        )
        return Predicted(request, usage, note)

    # ---- marks -------------------------------------------------------------------------------

    def _marks(self, request: SimRequest, bounds: list[Boundary]) -> list[_Mark]:
        if self.config.marks == "recorded":
            return self._recorded_marks(request, bounds)
        return self._planned_marks(request, bounds)

    def _recorded_marks(self, request: SimRequest, bounds: list[Boundary]) -> list[_Mark]:
        index = {(b.section, b.block): i for i, b in enumerate(bounds)}
        marks = []
        for si, section in enumerate(request.sections):
            for mark in section.marks:
                ttl = mark.ttl if mark.ttl in TTL_S else self.config.message_ttl
                marks.append(_Mark(index[(si, mark.block)], ttl))
        marks.sort(key=lambda m: m.at)
        if len(marks) > self.config.max_marks:
            raise ValueError(
                f"request {request.id} carries {len(marks)} cache marks; Anthropic accepts at most "
                f"{self.config.max_marks} (replay with planned marks instead)"
            )
        return marks

    def _planned_marks(self, request: SimRequest, bounds: list[Boundary]) -> list[_Mark]:
        cfg = self.config
        head_kinds = {i for i, s in enumerate(request.sections) if s.kind in HEAD_KINDS}
        head = _last(i for i, b in enumerate(bounds) if b.markable and b.section in head_kinds)
        newest = _last(i for i, b in enumerate(bounds) if b.markable and b.section not in head_kinds)
        marks: list[_Mark] = []
        if head is not None and bounds[head].tokens >= cfg.min_cacheable_tokens:
            marks.append(_Mark(head, cfg.head_ttl))
        if newest is None or bounds[newest].tokens < cfg.min_cacheable_tokens:
            return marks
        previous_key = self._previous_end.get(request.session_id)
        previous = next((i for i, b in enumerate(bounds) if b.key == previous_key), None)
        if previous is not None and previous != newest and previous != head:
            gap = bounds[newest].position - bounds[previous].position
            # The newest mark cannot see the previous entry: mark it again so that its own lookback
            # (distance 0) reads it, as the projection's bridge mark does.
            if gap > cfg.lookback and len(marks) + 2 <= cfg.max_marks:
                marks.append(_Mark(previous, cfg.message_ttl))
        marks.append(_Mark(newest, cfg.message_ttl))
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
            while i >= 0 and top - bounds[i].position <= lookback:
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
        out_of_reach = any(
            i not in reachable and self._live((model, b.key), t) for i, b in enumerate(bounds)
        )
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
        ttl_s = TTL_S[ttl]
        entry = self._entries.get(key)
        if entry is not None and entry.expiry > t:
            # Written again while still alive (e.g. by a parallel request): one entry, the longer
            # life, readable as soon as either writer streams.
            entry.expiry = max(entry.expiry, t + ttl_s)
            entry.readable_at = min(entry.readable_at, readable_at)
            entry.ttl_s = max(entry.ttl_s, ttl_s)
            return
        self._entries[key] = _Entry(tokens, ttl_s, t + ttl_s, readable_at)


def _last(indices: Iterable[int]) -> int | None:
    found = None
    for i in indices:
        found = i
    return found


def _dedupe(marks: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Marks at the same prefix length write one entry; keep the longer TTL."""
    out: list[tuple[int, str]] = []
    for tokens, ttl in sorted(marks, key=lambda m: m[0]):
        if out and out[-1][0] == tokens:
            if TTL_S[ttl] > TTL_S[out[-1][1]]:
                out[-1] = (tokens, ttl)
            continue
        out.append((tokens, ttl))
    return out


def simulate_anthropic(requests: Sequence[SimRequest], config: AnthropicSimConfig) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under Anthropic's cache rules."""
    return AnthropicSimulator(config).run(requests)
