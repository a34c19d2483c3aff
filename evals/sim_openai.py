"""OpenAI's prompt caches (two generations) and Gemini's implicit cache, replayed over recorded requests.

Automatic prefix caching (OpenAI up to GPT-5.5, Gemini implicit; provider-semantics §3, §5, §10):
- every request of at least `min_tokens` leaves its prompt in the cache; writes are free;
- a later request reads the longest common prefix with a live earlier request, rounded down to
  `granularity` tokens (128 for OpenAI in-memory retention), and nothing below `min_tokens`;
- in-memory retention: an entry is cleared after `idle_s` without use (5-10 minutes; the low
  end by default) and within `max_age_s` (1 hour) of being written; 24h retention keeps it a day;
- requests are routed by a hash of their first ~256 tokens plus `prompt_cache_key`; the replay
  assumes every request of the run reaches the same machine (an upper bound on hits).
The common prefix is found at section ends: two requests that agree on part of a section but
not all of it are counted as agreeing only up to the section before.

Exact-match breakpoints (OpenAI GPT-5.6 and later):
- implicit mode puts one breakpoint at the end of the newest message; the projection adds
  explicit ones on the static head and on the end of every earlier request (kept marked, because
  only an exact match at a breakpoint counts). The replay takes the breakpoints where earlier
  requests of the same session ended to be searchable in later ones either way (the "latest 80
  breakpoints in the conversation"); a new session, or a changed prefix, finds none of them;
- the latest `searched` (80) breakpoints are searched and the longest with a live entry is read;
  there is no fallback to a shorter, unmarked prefix;
- at most `max_written` (4) breakpoints are written per request, billed at the 30m write rate
  (1.25x input) from the hit to the last written one; entries live at least 30 minutes from the
  write (no refresh on read is assumed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hitrate.evals.sim_types import HEAD_KINDS, Boundary, Predicted, SimRequest, billed, boundaries, in_order, section_ends

# ---- automatic prefix (<= GPT-5.5, Gemini implicit) -----------------------------------------------


class PrefixSimConfig(BaseModel):
    """An automatic prefix cache: nothing to place, the layout alone decides."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_tokens: int = Field(1024, ge=0)
    """Shorter prompts are not cached, and shorter common prefixes are not read."""
    granularity: int = Field(128, ge=1)
    """Hits are rounded down to a multiple of this (OpenAI in-memory: 128; 1 = exact)."""
    idle_s: float = Field(300.0, gt=0)
    """An entry unused this long is gone (OpenAI in-memory retention: 5-10 minutes)."""
    max_age_s: float = Field(3600.0, gt=0)
    """An entry is gone this long after it was written, however often it is read."""

    @classmethod
    def retention(cls, kind: Literal["in_memory", "24h"], **overrides: object) -> "PrefixSimConfig":
        """OpenAI's two retention settings: in-memory (5 min idle, 1 h cap) or extended (24 h)."""
        base: dict[str, object] = {"idle_s": 300.0, "max_age_s": 3600.0} if kind == "in_memory" else {"idle_s": 86400.0, "max_age_s": 86400.0}
        return cls(**{**base, **overrides})


@dataclass
class _PrefixEntry:
    tokens: int
    written: float
    last_used: float
    readable_at: float


class PrefixCacheSimulator:
    def __init__(self, config: PrefixSimConfig) -> None:
        self.config = config
        self._entries: dict[tuple[str, str], _PrefixEntry] = {}

    def run(self, requests: Sequence[SimRequest]) -> list[Predicted]:
        return [self.step(r) for r in in_order(requests)]

    def _alive(self, entry: _PrefixEntry, t: float) -> bool:
        cfg = self.config
        return t - entry.last_used < cfg.idle_s and t - entry.written < cfg.max_age_s

    def step(self, request: SimRequest) -> Predicted:
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
        cached = 0 if common < cfg.min_tokens else common - common % cfg.granularity
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
        usage = billed(request.prompt_tokens - cached, cached, request.output_tokens)
        return Predicted(request, usage, note)


def simulate_prefix_cache(requests: Sequence[SimRequest], config: PrefixSimConfig) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under an automatic prefix cache."""
    return PrefixCacheSimulator(config).run(requests)


# ---- exact-match breakpoints (>= GPT-5.6) -------------------------------------------------------------


class BreakpointSimConfig(BaseModel):
    """OpenAI's exact-match breakpoint cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_tokens: int = Field(1024, ge=0)
    """A breakpoint whose prefix is shorter writes nothing."""
    ttl_s: float = Field(1800.0, gt=0)
    """Entries live this long from the write (30m; documented as a minimum)."""
    searched: int = Field(80, ge=1)
    """Latest breakpoints searched for a hit."""
    max_written: int = Field(4, ge=1)
    """Most breakpoints one request writes."""
    marks: Literal["planned", "recorded"] = "planned"
    """planned: a mark on the static head, as the projection places it; recorded: the marks each
    request carried. Either way the implicit breakpoint at the newest block is added, and the
    breakpoints earlier requests of the session ended on are searched."""


@dataclass
class _MarkEntry:
    tokens: int
    expiry: float
    readable_at: float


class BreakpointSimulator:
    def __init__(self, config: BreakpointSimConfig) -> None:
        self.config = config
        self._entries: dict[tuple[str, str], _MarkEntry] = {}
        self._ends: dict[str | None, list[str]] = {}
        """Per session: boundary keys where earlier requests ended (newest last)."""

    def run(self, requests: Sequence[SimRequest]) -> list[Predicted]:
        return [self.step(r) for r in in_order(requests)]

    def _marks(self, request: SimRequest, bounds: list[Boundary]) -> list[int]:
        head_sections = {i for i, s in enumerate(request.sections) if s.kind in HEAD_KINDS}
        newest = next((i for i in range(len(bounds) - 1, -1, -1) if bounds[i].markable and bounds[i].section not in head_sections), None)
        # Earlier requests of the conversation left breakpoints where they ended (their implicit
        # one, or the projection's sticky mark): those still in this prompt are searched too.
        at = {b.key: i for i, b in enumerate(bounds)}
        chosen: set[int] = {at[k] for k in self._ends.get(request.session_id, []) if k in at}
        if self.config.marks == "recorded":
            where = {(b.section, b.block): i for i, b in enumerate(bounds)}
            for si, section in enumerate(request.sections):
                chosen.update(where[(si, m.block)] for m in section.marks)
        else:
            head = next((i for i in range(len(bounds) - 1, -1, -1) if bounds[i].markable and bounds[i].section in head_sections), None)
            if head is not None:
                chosen.add(head)
        if newest is not None:
            chosen.add(newest)  # the implicit breakpoint
        kept = sorted(i for i in chosen if bounds[i].tokens >= self.config.min_tokens)
        return kept[-self.config.searched :]

    def step(self, request: SimRequest) -> Predicted:
        cfg = self.config
        t = request.t
        bounds = boundaries(request)
        marks = self._marks(request, bounds)
        hit, note = 0, "miss: cold" if marks else f"miss: no breakpoint reaches the {cfg.min_tokens}-token minimum"
        for i in reversed(marks):
            entry = self._entries.get((request.model, bounds[i].key))
            if entry is None:
                continue
            if entry.expiry <= t:
                note = "miss: ttl_expired"
            elif entry.readable_at > t:
                note = "miss: entry not ready (its writer had not started streaming)"
            else:
                hit = bounds[i].tokens
                note = f"read {hit} at an exact breakpoint"
                break
        to_write = [i for i in marks if bounds[i].tokens > hit][-cfg.max_written :]
        ready = t + request.first_token_delay
        for i in to_write:
            key = (request.model, bounds[i].key)
            entry = self._entries.get(key)
            if entry is not None and entry.expiry > t:
                entry.readable_at = min(entry.readable_at, ready)
                entry.expiry = max(entry.expiry, t + cfg.ttl_s)
            else:
                self._entries[key] = _MarkEntry(bounds[i].tokens, t + cfg.ttl_s, ready)
        written_to = bounds[to_write[-1]].tokens if to_write else hit
        if bounds:
            # The request's end stays marked in later requests of the session (sticky).
            newest = marks[-1] if marks else None
            if newest is not None:
                ends = self._ends.setdefault(request.session_id, [])
                if not ends or ends[-1] != bounds[newest].key:
                    ends.append(bounds[newest].key)
        usage = billed(request.prompt_tokens - written_to, hit, request.output_tokens, write_30m=written_to - hit)
        return Predicted(request, usage, note)


def simulate_openai_breakpoints(requests: Sequence[SimRequest], config: BreakpointSimConfig) -> list[Predicted]:
    """Predicted buckets for each request (in start order) under OpenAI's exact-match breakpoints."""
    return BreakpointSimulator(config).run(requests)
