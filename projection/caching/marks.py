"""Where to put cache marks: one planner for both mark families, over a prompt's block ends.

Anthropic (explicit `cache_control` marks):
- at most `max_marks` (4) marks per request;
- each mark looks back about `lookback` (20) block positions for an entry an earlier request wrote;
  a run of consecutive tool_use blocks is one position, and so is a run of tool_result blocks;
- a mark whose prefix is below the model's minimum cacheable length is silently ignored, so we never
  place one;
- 1h entries must come before 5m entries, so TTLs never increase along the prompt.
Plan: one mark at the end of the static head (tools + system + docs), one on the newest block, and,
when the new turn added more than `lookback` positions since the previous request's end, a bridge
mark on that end (distance 0: its lookback finds the previous entry exactly, and reads are free).

OpenAI >= 5.6 (`prompt_cache_breakpoint`): exact match only, at most 4 written per request, the latest
`searched_marks` marks searched. Plan: the head, every earlier request's end (kept marked so it is
found again), the newest block; the latest `searched_marks` of them.

Every other family caches prefixes on its own: nothing to place; the stable layout alone decides.

The projection plans from its sections (earlier request ends read off the transcript); a replay plans
from recorded requests (earlier ends remembered by the simulator). Both call `plan_marks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hitrate.projection.caching.requests import Boundary
from hitrate.projection.caching.rules import CacheRules

Purpose = Literal["head", "newest", "bridge", "sticky"]


@dataclass(frozen=True, slots=True)
class PlannedMark:
    at: int
    """Index into the request's boundaries."""
    ttl: str
    purpose: Purpose


@dataclass(frozen=True, slots=True)
class MarkPlan:
    marks: tuple[PlannedMark, ...]
    """In prompt order."""
    notes: tuple[str, ...] = ()
    """Remarks worth showing (why a mark was left out)."""


def last_markable(bounds: Sequence[Boundary], head: frozenset[int], *, in_head: bool) -> int | None:
    """Index of the last markable boundary inside (or outside) the static head."""
    for i in range(len(bounds) - 1, -1, -1):
        b = bounds[i]
        if b.markable and (b.section in head) == in_head:
            return i
    return None


def plan_marks(bounds: Sequence[Boundary], head: frozenset[int], request_ends: Sequence[int], rules: CacheRules) -> MarkPlan:
    """Marks for one request under `rules`. `head`: the static head's section indices;
    `request_ends`: boundaries where earlier requests of the session ended, oldest first. Pure."""
    if rules.family == "anthropic":
        return _plan_anthropic(bounds, head, request_ends, rules)
    if rules.family == "openai_breakpoints":
        return _plan_openai_breakpoints(bounds, head, request_ends, rules)
    return MarkPlan(marks=())


def _plan_anthropic(bounds: Sequence[Boundary], head: frozenset[int], request_ends: Sequence[int], rules: CacheRules) -> MarkPlan:
    assert rules.head_ttl is not None and rules.message_ttl is not None
    minimum = rules.min_cacheable_tokens
    notes: list[str] = []
    marks: list[PlannedMark] = []
    budget = rules.max_marks

    head_at = last_markable(bounds, head, in_head=True)
    if head_at is not None and budget > 0:
        if bounds[head_at].tokens >= minimum:
            marks.append(PlannedMark(head_at, rules.head_ttl, "head"))
        else:
            notes.append(f"static head is {bounds[head_at].tokens} tokens, below the {minimum}-token minimum: not marked")

    newest = last_markable(bounds, head, in_head=False)
    if newest is None:
        return MarkPlan(tuple(marks), tuple(notes))
    if bounds[newest].tokens < minimum:
        notes.append(f"prompt is {bounds[newest].tokens} tokens, below the {minimum}-token minimum: nothing cacheable")
        return MarkPlan(tuple(marks), tuple(notes))

    previous = request_ends[-1] if request_ends else None
    if previous is not None and previous != newest and previous != head_at:
        gap = bounds[newest].position - bounds[previous].position
        # The previous request wrote its entry at its newest block. If this turn added more positions
        # than the lookback, the newest mark can no longer see it: mark that block again, so its own
        # lookback (distance 0) reads the entry, and the newest mark only writes what is new.
        if gap > rules.lookback and bounds[previous].tokens >= minimum:
            if len(marks) + 2 <= budget:
                marks.append(PlannedMark(previous, rules.message_ttl, "bridge"))
            else:
                notes.append(
                    f"turn added {gap} positions (lookback {rules.lookback}) but the mark budget "
                    f"({budget}) leaves no room for a bridge: the previous entry will not be read"
                )
    if len(marks) < budget:
        marks.append(PlannedMark(newest, rules.message_ttl, "newest"))
    else:
        notes.append("mark budget exhausted before the newest message")
    return MarkPlan(tuple(marks), tuple(notes))


def _plan_openai_breakpoints(
    bounds: Sequence[Boundary], head: frozenset[int], request_ends: Sequence[int], rules: CacheRules
) -> MarkPlan:
    assert rules.head_ttl is not None and rules.message_ttl is not None
    minimum = rules.min_cacheable_tokens
    candidates: list[PlannedMark] = []
    head_at = last_markable(bounds, head, in_head=True)
    if head_at is not None:
        candidates.append(PlannedMark(head_at, rules.head_ttl, "head"))
    # Earlier request ends stay marked: an exact-match cache only finds entries where a mark sits.
    seen = {head_at}
    for at in request_ends:
        if at not in seen:
            candidates.append(PlannedMark(at, rules.message_ttl, "sticky"))
            seen.add(at)
    newest = last_markable(bounds, head, in_head=False)
    if newest is not None and newest not in seen:
        candidates.append(PlannedMark(newest, rules.message_ttl, "newest"))
    candidates.sort(key=lambda m: m.at)
    kept = [c for c in candidates if bounds[c.at].tokens >= minimum]
    notes: list[str] = []
    if len(kept) < len(candidates):
        notes.append(f"{len(candidates) - len(kept)} mark(s) below the {minimum}-token minimum left out")
    if len(kept) > rules.searched_marks:
        notes.append(f"only the latest {rules.searched_marks} marks are searched; {len(kept) - rules.searched_marks} dropped")
        kept = kept[-rules.searched_marks :]
    return MarkPlan(tuple(kept), tuple(notes))
