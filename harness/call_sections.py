"""A projection `Prompt` as the per-section facts the ledger stores for what-if replay.

The session records these on every call (`CallRecord.sections`); the evals what-if reads them back.
"""

from __future__ import annotations

from hitrate.projection.prompt import Prompt
from hitrate.store.records import CallSection, SectionMark


def call_sections(prompt: Prompt) -> list[CallSection]:
    """Kind, index, chained hash, tokens, per-block tokens / lookback positions / markability, and
    the marks placed, for each section of `prompt`."""
    marks: dict[int, list[SectionMark]] = {}
    for bp in prompt.breakpoints:
        section = prompt.sections[bp.section]
        # Breakpoints on messages count blocks within the message; the ledger counts within the section.
        marks.setdefault(bp.section, []).append(SectionMark(block=bp.block_index - section.block_start, ttl=bp.ttl))
    return [
        CallSection(
            kind=s.kind,
            index=s.index,
            hash=s.hash,
            tokens=s.tokens,
            role=prompt.messages[s.message_index].role if s.message_index is not None else None,
            block_tokens=list(s.block_tokens),
            positions=list(s.block_positions),
            markable=list(s.markable),
            marks=marks.get(i, []),
        )
        for i, s in enumerate(prompt.sections)
    ]
