"""OpenAI's exact-match breakpoint cache (GPT-5.6 and later).

Rules (provider-semantics §3, §10):
- implicit mode puts one breakpoint at the end of the newest message; the projection adds explicit
  ones on the static head and on the end of every earlier request (kept marked, because only an
  exact match at a breakpoint counts). The replay takes the breakpoints where earlier requests of
  the same session ended to be searchable in later ones either way; a new session, or a changed
  prefix, finds none of them;
- the latest `searched` breakpoints are searched and the longest with a live entry is read; there
  is no fallback to a shorter, unmarked prefix;
- at most `max_written` (4) breakpoints are written per request, billed at the 30m write rate
  (1.25x input) from the hit to the last written one; entries live at least 30 minutes from the
  write (documented as a minimum; no refresh on read is assumed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from hitrate.projection.caching.anthropic import marked_cacheable, marked_entries
from hitrate.projection.caching.family import CacheFamily, Entry, Outcome, Reach
from hitrate.projection.caching.marks import last_markable
from hitrate.projection.caching.rules import OPENAI_SEARCHED_BREAKPOINTS
from hitrate.projection.caching.requests import Boundary, CacheRequest, boundaries, head_sections
from hitrate.projection.caching.ttl import TTL_SECONDS, Lifetime, ttl_seconds

BREAKPOINT_TTL = "30m"
# `prompt_cache_options.ttl` is 30m and documented as a minimum; entries may live longer, so past
# 30 minutes the state is unknown, not cold.
OPENAI_BREAKPOINTS = Lifetime(label="30m min", guaranteed_s=TTL_SECONDS[BREAKPOINT_TTL], longest_s=None, refreshed_by_any_call=False)


class BreakpointSimConfig(BaseModel):
    """OpenAI's exact-match breakpoint cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_tokens: int = Field(1024, ge=0)
    """A breakpoint whose prefix is shorter writes nothing."""
    ttl_s: float = Field(float(TTL_SECONDS[BREAKPOINT_TTL]), gt=0)
    """Entries live this long from the write (30m; documented as a minimum)."""
    searched: int = Field(OPENAI_SEARCHED_BREAKPOINTS, ge=1)
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


class BreakpointCache:
    """One account's exact-match breakpoint cache; `step` replays requests in start order."""

    def __init__(self, config: BreakpointSimConfig) -> None:
        self.config = config
        self._entries: dict[tuple[str, str], _MarkEntry] = {}
        self._ends: dict[str | None, list[str]] = {}
        """Per session: boundary keys where earlier requests ended (newest last)."""

    def _marks(self, request: CacheRequest, bounds: list[Boundary]) -> list[int]:
        head = head_sections(request)
        # Earlier requests of the conversation left breakpoints where they ended (their implicit
        # one, or the projection's sticky mark): those still in this prompt are searched too.
        at = {b.key: i for i, b in enumerate(bounds)}
        chosen: set[int] = {at[k] for k in self._ends.get(request.session_id, []) if k in at}
        if self.config.marks == "recorded":
            where = {(b.section, b.block): i for i, b in enumerate(bounds)}
            for si, section in enumerate(request.sections):
                chosen.update(where[(si, m.block)] for m in section.marks)
        else:
            head_at = last_markable(bounds, head, in_head=True)
            if head_at is not None:
                chosen.add(head_at)
        newest = last_markable(bounds, head, in_head=False)
        if newest is not None:
            chosen.add(newest)  # the implicit breakpoint
        kept = sorted(i for i in chosen if bounds[i].tokens >= self.config.min_tokens)
        return kept[-self.config.searched :]

    def step(self, request: CacheRequest) -> Outcome:
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
        if marks:
            # The request's end stays marked in later requests of the session (sticky).
            ends = self._ends.setdefault(request.session_id, [])
            if not ends or ends[-1] != bounds[marks[-1]].key:
                ends.append(bounds[marks[-1]].key)
        return Outcome(
            read=hit, fresh=request.prompt_tokens - written_to, writes={BREAKPOINT_TTL: written_to - hit}, note=note
        )


class OpenAIBreakpointsFamily(CacheFamily):
    name: ClassVar = "openai_breakpoints"

    def cache(self, *, marks: Literal["planned", "recorded"] = "recorded") -> BreakpointCache:
        r = self.rules
        return BreakpointCache(
            BreakpointSimConfig(min_tokens=r.min_cacheable_tokens, searched=r.searched_marks, max_written=max(1, r.max_marks), marks=marks)
        )

    def entries_left(self, request: CacheRequest, request_ends: Sequence[int]) -> list[Entry]:
        return marked_entries(request)

    def reach(self, entry: Entry, request: CacheRequest) -> Reach:
        # Exact match only: the entry is found only where a searched mark sits on the same block.
        searched = marked_entries(request)[-self.rules.searched_marks :]
        if any((m.section, m.block) == (entry.section, entry.block) for m in searched):
            return "ok"
        return "breakpoint_budget"

    def cacheable(self, request: CacheRequest) -> int:
        return marked_cacheable(request, self.rules.min_cacheable_tokens)

    def lifetime(self, ttl_class: str | None = None, write_ttls: Sequence[str] = ()) -> Lifetime:
        if ttl_class is not None and ttl_seconds(ttl_class) > ttl_seconds(BREAKPOINT_TTL):
            seconds = float(ttl_seconds(ttl_class))
            return Lifetime(label=f"{ttl_class} min", guaranteed_s=seconds, longest_s=None, refreshed_by_any_call=False)
        return OPENAI_BREAKPOINTS
