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
    compacted         (set by the session) the history was replaced by its summary on purpose
    cleared           (set by the session) old tool results were replaced by stubs on purpose
    effort_changed    (set by the session) the reasoning effort changed, and the provider read less
                      than the unchanged bytes allow (Anthropic keys cached messages on thinking settings)
    unknown           nothing above applies, yet the provider reported less than expected
    hit               the expected read happened (or, with no usage reported, would happen)

The cache family (`projection.caching`) does the counting: the previous request, and the earlier
requests of its session as far as it shows them, are stepped through a fresh cache of the family,
then this request; what that step reads is the expected read. The family also says which entries
the previous requests left and whether this request's marks reach each one, which names the miss.

Token counts here are the projection's estimates; when the provider's own prompt count is given,
they are scaled to it before comparing with the reported cache read.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hitrate.projection.cache_view import cache_request, earlier_request_ends, session_so_far
from hitrate.projection.caching import CacheRules, Entry, family_for
from hitrate.projection.caching.family import CacheState
from hitrate.projection.diffpath import section_difference
from hitrate.projection.prompt import Prompt, SectionKind

MissReason = Literal[
    "hit",
    "compacted",
    "cleared",
    "effort_changed",
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


def explain_miss(
    previous: Prompt | None,
    current: Prompt,
    *,
    seconds_since_previous: float,
    previous_model: str,
    current_model: str,
    rules: CacheRules,
    reported_cache_read: int | None,
    reported_prompt_tokens: int | None = None,
    tolerance: float = 0.1,
    cache: CacheState | None = None,
    started_at: datetime | None = None,
) -> MissExplanation:
    """Label the current request's cache outcome against the previous request of the session.

    `seconds_since_previous` is from the start of the previous request to the start of this one
    (cache lifetimes count from a request's start). `reported_cache_read` is the provider's cache-read
    count, None when it did not report one (the label is then a prediction). `reported_prompt_tokens`
    (the provider's total prompt count) calibrates the projection's token estimates.

    `cache` is the session's cache state before this request (a `family.cache()` stepped with every
    earlier request); it is stepped with this one, sent at `started_at`. Without it, a fresh cache
    is stepped with what `previous` shows of the session.
    """
    family = family_for(rules)
    scale = 1.0
    if reported_prompt_tokens and current.total_tokens:
        scale = reported_prompt_tokens / current.total_tokens
    read = reported_cache_read

    def scaled(tokens: int) -> int:
        return round(tokens * scale)

    def reached(tokens: int) -> bool:
        # Estimates are approximate: count a read within `tolerance` (plus one rounding step) as full.
        return read is not None and read > 0 and read >= scaled(tokens) * (1 - tolerance) - rules.prefix_granularity

    # What this request reads by the family's rules: the session's cache stepped with it.
    if cache is not None:
        when = started_at or datetime.now(timezone.utc)
        current_view = cache_request(current, started_at=when, model=current_model)
    else:
        current_view = cache_request(current, started_at=seconds_since_previous, model=current_model)
        cache = family.cache()
        if previous is not None:
            for request in session_so_far(previous, started_at=0.0, model=previous_model):
                cache.step(request)
    expected = cache.step(current_view).read

    if previous is None:
        cacheable = family.cacheable(current_view)
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

    previous_view = cache_request(previous, model=previous_model)
    all_entries = family.entries_left(previous_view, earlier_request_ends(previous))
    entries = [e for e in all_entries if e.tokens >= rules.min_cacheable_tokens and e.tokens > 0]
    ideal = max(entries, key=lambda e: e.tokens, default=None)

    if previous_model != current_model:
        if ideal is not None and reached(ideal.tokens):
            return MissExplanation(reason="hit", label="hit", expected_read=scaled(ideal.tokens))
        if read is None and ideal is not None and expected >= ideal.tokens:
            # Back on a model whose entries are still cached: nothing the previous request left is lost.
            return MissExplanation(reason="hit", label="hit", expected_read=scaled(expected), detail="read this model's earlier entry")
        lost = scaled(ideal.tokens) if ideal else 0
        return MissExplanation(
            reason="model_changed",
            label="model_changed",
            tokens_missed=max(0, lost - (read if read is not None else scaled(expected))),
            expected_read=scaled(expected),
            detail=f"{previous_model} -> {current_model}: caches are per model",
        )

    first_diff = _first_difference(previous, current)

    if ideal is None:
        common = previous.sections[first_diff - 1].prefix_tokens if first_diff > 0 else 0
        if read or (read is None and expected):
            return MissExplanation(reason="hit", label="hit", expected_read=read or scaled(expected))
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

    def status(entry: Entry) -> str:
        if entry.section >= first_diff:
            return "prefix_changed"
        reach = family.reach(entry, current_view)
        if reach != "ok":
            return reach
        if entry.ttl_s is not None and seconds_since_previous > entry.ttl_s:
            return "ttl_expired"
        return "ok"

    why = status(ideal)
    # The longest prefix this request could have read: the previous request's longest entry, or an
    # older entry of the session that the cache still holds (e.g. after a change was undone).
    best = max(ideal.tokens, expected)

    if read is not None:
        if reached(best):
            return MissExplanation(reason="hit", label="hit", expected_read=scaled(best))
        missed = max(0, scaled(best) - read)
        if why == "ok" or expected >= ideal.tokens:
            return MissExplanation(
                reason="unknown",
                label="unknown",
                tokens_missed=missed,
                expected_read=scaled(expected),
                detail=f"expected about {scaled(expected)} cached tokens, provider reported {read}",
            )
    else:
        if why == "ok" or expected >= ideal.tokens:
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
        f"{ideal.ttl_s:.0f}s lifetime" if ideal.ttl_s is not None else "",
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
