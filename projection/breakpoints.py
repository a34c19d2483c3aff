"""Where to put cache marks on a projected prompt: the projection's sections as block ends for the
caching layer's planner (`caching.marks`), and the planned marks back as `Breakpoint`s.

The rules themselves (budgets, lookback, minimums, TTL order) live in `projection.caching`; this
module only knows the projection's layout: the static head is sections 0-2, and earlier requests
ended at every user message an assistant message answered.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from pydantic import BaseModel

from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.caching.requests import Boundary
from hitrate.projection.prompt import Breakpoint, Section
from hitrate.projection.transcript import AssistantMessage, Message, UserMessage

HEAD_SECTIONS = frozenset({0, 1, 2})
"""tools, system, docs: always present, always first."""


class Plan(BaseModel):
    """Planned marks and any remarks worth showing (why a mark was left out)."""

    breakpoints: tuple[Breakpoint, ...]
    notes: tuple[str, ...] = ()


def _mark(sections: Sequence[Section], si: int, j: int, ttl: str, purpose: str) -> Breakpoint:
    s = sections[si]
    return Breakpoint.model_construct(
        section=si,
        kind=s.kind,
        message_index=s.message_index,
        block_index=s.block_start + j,
        ttl=ttl,
        purpose=purpose,
        position=s.block_positions[j],
        prefix_tokens=s.block_prefix_tokens(j),
    )


def _last_markable(sections: Sequence[Section], start: int, stop: int = -1) -> tuple[int, int] | None:
    """(section index, block within section) of the last markable block in sections[stop+1 .. start]."""
    for si in range(start, stop, -1):
        flags = sections[si].markable
        for j in range(len(flags) - 1, -1, -1):
            if flags[j]:
                return si, j
    return None


def _answered_user_message(messages: Sequence[Message], mi: int | None) -> bool:
    return (
        mi is not None
        and isinstance(messages[mi], UserMessage)
        and mi + 1 < len(messages)
        and isinstance(messages[mi + 1], AssistantMessage)
    )


def _request_ends_newest_first(
    sections: Sequence[Section], messages: Sequence[Message]
) -> Iterator[tuple[int, int] | None]:
    """For every user message an assistant message answered, newest first: its last markable block,
    or None when it has none. Lazy, so the previous request's end costs only a walk back to it."""
    si = len(sections) - 1
    while si > 2:
        mi = sections[si].message_index
        # Walk to the first section of this message.
        first = si
        while first - 1 > 2 and sections[first - 1].message_index == mi:
            first -= 1
        if _answered_user_message(messages, mi):
            yield _last_markable(sections, si, first - 1)
        si = first - 1


def request_ends(sections: Sequence[Section], messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Where earlier requests ended, newest first: the last markable block of every user message that
    an assistant message answered (each request ends with a user turn, and its reply follows it)."""
    return [end for end in _request_ends_newest_first(sections, messages) if end is not None]


def section_boundaries(sections: Sequence[Section]) -> list[Boundary]:
    """Every block end of the prompt, with the projection's own prefix tokens and positions."""
    out: list[Boundary] = []
    for si, s in enumerate(sections):
        n = len(s.block_tokens)
        for j in range(n):
            last = j == n - 1
            key = s.hash if last else f"{s.hash}#{j}"
            out.append(Boundary(key, si, j, s.block_prefix_tokens(j), s.block_positions[j], s.markable[j], last))
    return out


def plan_breakpoints(sections: Sequence[Section], messages: Sequence[Message], rules: CacheRules) -> Plan:
    """Choose cache marks for a prompt's sections under `rules`. Pure: same sections, same plan."""
    if not rules.places_marks:
        return Plan(breakpoints=())
    bounds = section_boundaries(sections)
    at = {(b.section, b.block): i for i, b in enumerate(bounds)}
    ends = [at[end] for end in reversed(request_ends(sections, messages))]
    plan = family_for(rules).plan(bounds, HEAD_SECTIONS, ends)
    marks = tuple(_mark(sections, bounds[m.at].section, bounds[m.at].block, m.ttl, m.purpose) for m in plan.marks)  # type: ignore[arg-type]
    return Plan(breakpoints=marks, notes=plan.notes)
