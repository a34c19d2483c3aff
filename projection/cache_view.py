"""A projected prompt as its cache sees it: the `caching.CacheRequest` every family steps with.

The view keeps the projection's own numbers (section hashes, token estimates, block positions, which
blocks may carry a mark, the planned marks), so planning, explaining and replaying a prompt all see
the same boundaries.
"""

from __future__ import annotations

from datetime import datetime, timezone

from hitrate.projection.breakpoints import request_ends
from hitrate.projection.caching.requests import CacheMark, CacheRequest, CacheSection
from hitrate.projection.prompt import Prompt


def cache_request(
    prompt: Prompt,
    *,
    started_at: float | datetime = 0.0,
    model: str | None = None,
    session_id: str | None = "session",
    request_id: str = "request",
    upto_section: int | None = None,
) -> CacheRequest:
    """The prompt (or its first sections, through `upto_section`) as a cache request."""
    marks: dict[int, list[CacheMark]] = {}
    for b in prompt.breakpoints:
        section = prompt.sections[b.section]
        marks.setdefault(b.section, []).append(CacheMark(block=b.block_index - section.block_start, ttl=b.ttl))
    sections = prompt.sections if upto_section is None else prompt.sections[: upto_section + 1]
    view = tuple(
        CacheSection(
            kind=s.kind,
            index=s.index,
            hash=s.hash,
            tokens=s.tokens,
            role=prompt.messages[s.message_index].role if s.message_index is not None else None,
            block_tokens=s.block_tokens,
            positions=s.block_positions,
            markable=s.markable,
            marks=tuple(marks.get(si, ())),
        )
        for si, s in enumerate(sections)
    )
    when = started_at if isinstance(started_at, datetime) else datetime.fromtimestamp(started_at, tz=timezone.utc)
    return CacheRequest(id=request_id, session_id=session_id, model=model or prompt.model, started_at=when, sections=view)


def earlier_request_ends(prompt: Prompt) -> list[int]:
    """Section indices where earlier requests of the session ended, oldest first."""
    return sorted({si for si, _ in request_ends(prompt.sections, prompt.messages)})


def session_so_far(prompt: Prompt, *, started_at: float, model: str | None = None) -> list[CacheRequest]:
    """The requests a prompt's session sent up to and including it, as far as the prompt shows
    them: one per earlier request end (its prefix, with the marks that lie inside it), then the
    prompt itself. All at `started_at`: only the last one's timing is known."""
    ends = [si for si in earlier_request_ends(prompt) if si < len(prompt.sections) - 1]
    views = [
        cache_request(prompt, started_at=started_at, model=model, upto_section=si, request_id=f"end-{si}") for si in ends
    ]
    views.append(cache_request(prompt, started_at=started_at, model=model))
    return views
