"""Why a request missed the cache: compare it with the previous request of the session.

The previous request left cache entries behind (where its marks sat, or, for providers that cache
prefixes on their own, along its whole prefix). The explanation takes the longest of them (the
"ideal" read) and asks, in order, what kept the current request from reading it:

    cold              no previous request in this session, and no near-whole read from outside it
    model_changed     caches are per model
    below_min_tokens  the previous prefix was too short to be cached at all
    prefix_changed    a byte before the entry's end differs (section + line or JSON path)
    lookback_exceeded the entry is intact but no mark of ours is within lookback reach of it
    breakpoint_budget same, but every mark slot was used / the entry was not kept marked
    ttl_expired       more time passed than the entry's TTL
    unknown           nothing above applies, yet the provider reported less than expected
    hit               the expected read happened (or, with no usage reported, would happen)

Token counts here are the projection's estimates; when the provider's own prompt count is given,
they are scaled to it before comparing with the reported cache read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hitrate.projection.breakpoints import ProviderRules, request_ends
from hitrate.projection.diffpath import section_difference
from hitrate.projection.prompt import TTL_SECONDS, Prompt, SectionKind

MissReason = Literal[
    "hit",
    "ttl_expired",
    "prefix_changed",
    "model_changed",
    "below_min_tokens",
    "lookback_exceeded",
    "breakpoint_budget",
    "cold",
    "unknown",
]


class MissExplanation(BaseModel):
    """One request's cache outcome, as a label the ledger can store."""

    model_config = ConfigDict(frozen=True)

    reason: MissReason
    label: str
    """`reason`, or for prefix changes `prefix_changed(<section>, <line N | json path>)`."""
    section_kind: SectionKind | None = None
    section_index: int | None = None
    path: str | None = None
    tokens_missed: int = 0
    """Tokens that could have been read from cache and were not (provider tokens when calibrated)."""
    expected_read: int = 0
    """Tokens the rules say this request could still read."""
    detail: str = ""


@dataclass(frozen=True)
class _Entry:
    section: int
    block_index: int
    tokens: int
    position: int
    ttl_seconds: float | None


def _first_difference(previous: Prompt, current: Prompt) -> int:
    """Index of the first section whose chained hash differs (binary search: the chain agrees on a
    prefix and disagrees from then on). Equals the shorter length when one extends the other."""
    lo, hi = 0, min(len(previous.sections), len(current.sections))
    while lo < hi:
        mid = (lo + hi) // 2
        if previous.sections[mid].hash == current.sections[mid].hash:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _entries(previous: Prompt, rules: ProviderRules) -> list[_Entry]:
    """Cache entries the previous request left, longest last, before any minimum is applied."""
    family = rules.family
    if family in ("anthropic", "openai_breakpoints"):
        return [
            _Entry(b.section, b.block_index, b.prefix_tokens, b.position, TTL_SECONDS[b.ttl]) for b in previous.breakpoints
        ]
    ttl = rules.implicit_ttl_seconds
    sections = previous.sections
    if family == "deepseek":
        # Prefix units are saved at the end of each request's input: earlier request ends and this one.
        ends = sorted({si for si, _ in request_ends(sections, previous.messages)} | {len(sections) - 1})
        return [_Entry(si, -1, sections[si].prefix_tokens, sections[si].position_end, ttl) for si in ends]
    # Automatic prefix caches (OpenAI <= 5.5, vLLM/SGLang, the local engine) match any prefix;
    # OpenAI <= 5.5 only in whole multiples of its granularity.
    g = rules.prefix_granularity
    return [
        _Entry(si, -1, (s.prefix_tokens // g) * g, s.position_end, ttl)
        for si, s in enumerate(sections)
        if s.tokens > 0
    ]


def _cacheable(prompt: Prompt, rules: ProviderRules) -> int:
    if rules.places_marks:
        tokens = max((b.prefix_tokens for b in prompt.breakpoints), default=0)
    else:
        tokens = (prompt.total_tokens // rules.prefix_granularity) * rules.prefix_granularity
    return tokens if tokens >= rules.min_cacheable_tokens else 0


def explain_miss(
    previous: Prompt | None,
    current: Prompt,
    *,
    seconds_since_previous: float,
    previous_model: str,
    current_model: str,
    rules: ProviderRules,
    reported_cache_read: int | None,
    reported_prompt_tokens: int | None = None,
    tolerance: float = 0.1,
) -> MissExplanation:
    """Label the current request's cache outcome against the previous request of the session.

    `seconds_since_previous` is from the start of the previous request to the start of this one
    (cache lifetimes count from a request's start). `reported_cache_read` is the provider's cache-read
    count, None when it did not report one (the label is then a prediction). `reported_prompt_tokens`
    (the provider's total prompt count) calibrates the projection's token estimates.
    """
    scale = 1.0
    if reported_prompt_tokens and current.total_tokens:
        scale = reported_prompt_tokens / current.total_tokens
    read = reported_cache_read

    def scaled(tokens: int) -> int:
        return round(tokens * scale)

    def reached(tokens: int) -> bool:
        # Estimates are approximate: count a read within `tolerance` (plus one rounding step) as full.
        return read is not None and read > 0 and read >= scaled(tokens) * (1 - tolerance) - rules.prefix_granularity

    if previous is None:
        cacheable = _cacheable(current, rules)
        if read and reached(cacheable):
            return MissExplanation(reason="hit", label="hit", expected_read=read, detail="read an entry from outside this session")
        # A partial read (e.g. another session's entry covering only the chat template's opening
        # bytes, or a shared head) is still a cold start: the tokens not read are what it missed.
        detail = "first request of the session"
        if read:
            detail += f"; {read} tokens read from an entry outside it"
        return MissExplanation(
            reason="cold", label="cold", tokens_missed=max(0, scaled(cacheable) - (read or 0)), detail=detail
        )

    all_entries = _entries(previous, rules)
    entries = [e for e in all_entries if e.tokens >= rules.min_cacheable_tokens and e.tokens > 0]
    ideal = max(entries, key=lambda e: e.tokens, default=None)

    if previous_model != current_model:
        if ideal is not None and reached(ideal.tokens):
            return MissExplanation(reason="hit", label="hit", expected_read=scaled(ideal.tokens))
        lost = scaled(ideal.tokens) if ideal else 0
        return MissExplanation(
            reason="model_changed",
            label="model_changed",
            tokens_missed=max(0, lost - (read or 0)),
            detail=f"{previous_model} -> {current_model}: caches are per model",
        )

    first_diff = _first_difference(previous, current)

    if ideal is None:
        common = previous.sections[first_diff - 1].prefix_tokens if first_diff > 0 else 0
        if read:
            return MissExplanation(reason="hit", label="hit", expected_read=read)
        if rules.places_marks and not previous.breakpoints and previous.total_tokens >= rules.min_cacheable_tokens:
            return MissExplanation(
                reason="breakpoint_budget",
                label="breakpoint_budget",
                tokens_missed=scaled(common),
                detail="the previous request placed no cache marks",
            )
        return MissExplanation(
            reason="below_min_tokens",
            label="below_min_tokens",
            tokens_missed=scaled(common),
            detail=f"the previous prefix was below the {rules.min_cacheable_tokens}-token minimum, so nothing was cached",
        )

    current_marks = current.breakpoints[-rules.searched_marks :] if rules.family == "openai_breakpoints" else current.breakpoints

    def status(entry: _Entry) -> str:
        if entry.section >= first_diff:
            return "prefix_changed"
        if rules.family == "anthropic":
            if not any(0 <= m.position - entry.position <= rules.lookback for m in current.breakpoints):
                return "breakpoint_budget" if len(current.breakpoints) >= rules.max_marks else "lookback_exceeded"
        elif rules.family == "openai_breakpoints":
            # Exact match only: the entry is found only where a searched mark sits on the same block.
            if not any((m.section, m.block_index) == (entry.section, entry.block_index) for m in current_marks):
                return "breakpoint_budget"
        if entry.ttl_seconds is not None and seconds_since_previous > entry.ttl_seconds:
            return "ttl_expired"
        return "ok"

    why = status(ideal)
    expected = max((e.tokens for e in entries if status(e) == "ok"), default=0)

    if read is not None:
        if reached(ideal.tokens):
            return MissExplanation(reason="hit", label="hit", expected_read=scaled(ideal.tokens))
        missed = max(0, scaled(ideal.tokens) - read)
        if why == "ok":
            return MissExplanation(
                reason="unknown",
                label="unknown",
                tokens_missed=missed,
                expected_read=scaled(expected),
                detail=f"expected about {scaled(expected)} cached tokens, provider reported {read}",
            )
    else:
        if why == "ok":
            return MissExplanation(reason="hit", label="hit", expected_read=scaled(expected))
        missed = scaled(ideal.tokens - expected)

    if why == "prefix_changed":
        old = previous.sections[first_diff] if first_diff < len(previous.sections) else None
        new = current.sections[first_diff] if first_diff < len(current.sections) else None
        shown = new or old
        assert shown is not None
        if old is None or new is None:
            path = "added" if old is None else "removed"
        else:
            path = section_difference(old.data, new.data, is_json=new.kind not in ("system", "docs"))
        return MissExplanation(
            reason="prefix_changed",
            label=f"prefix_changed({shown.label}, {path})",
            section_kind=shown.kind,
            section_index=shown.index,
            path=path,
            tokens_missed=missed,
            expected_read=scaled(expected),
            detail=f"first difference in {shown.label} at {path}",
        )
    details = {
        "ttl_expired": f"{seconds_since_previous:.0f}s since the previous request, longer than the entry's "
        f"{ideal.ttl_seconds:.0f}s lifetime" if ideal.ttl_seconds is not None else "",
        "lookback_exceeded": f"no mark within {rules.lookback} positions of the previous entry (position {ideal.position})",
        "breakpoint_budget": "the previous entry is not under any searched mark of this request",
    }
    return MissExplanation(
        reason=why,  # type: ignore[arg-type]
        label=why,
        tokens_missed=missed,
        expected_read=scaled(expected),
        detail=details.get(why, ""),
    )
