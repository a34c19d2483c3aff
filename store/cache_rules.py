"""Provider rules that turn a cache situation into billed token counts.

Small pure functions used by cost what-ifs and by tests of the reference's worked examples:
how Anthropic bills a request whose breakpoints mix 1h and 5m TTLs, and how many tokens an
OpenAI automatic-prefix cache can return for a shared prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from hitrate.store.prices import ModelPrice
from hitrate.store.usage import Usage

AnthropicTTL = Literal["5m", "1h"]


def anthropic_bill_split(
    prompt_tokens: int,
    breakpoints: Sequence[tuple[int, AnthropicTTL]],
    hit_tokens: int,
) -> Usage:
    """Billed buckets of an Anthropic request with cache breakpoints.

    `breakpoints` are (prefix length in tokens, TTL) in prompt order; `hit_tokens` is the length
    of the longest live cached prefix found (0 for none). Anthropic's rule for mixed TTLs uses
    three positions: A = the hit, B = the last 1h breakpoint after A (else A), C = the last
    breakpoint. It bills a read for A, a 1h write for B - A, a 5m write for C - B, and the
    tokens after C as fresh input. 1h entries must come before 5m entries.
    """
    positions = [p for p, _ in breakpoints]
    if positions != sorted(positions) or len(set(positions)) != len(positions):
        raise ValueError(f"breakpoints must be in increasing prompt order, got {positions}")
    seen_5m = False
    for position, ttl in breakpoints:
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
    b = max([p for p, ttl in breakpoints if ttl == "1h" and p > a], default=a)
    c = max(last, a)
    return Usage(
        fresh_input=prompt_tokens - c,
        cache_write_5m=c - b,
        cache_write_30m=0,
        cache_write_1h=b - a,
        cache_write_12h=0,
        cache_read=a,
    )


def openai_cached_tokens(shared_prefix_tokens: int, model: ModelPrice) -> int:
    """Tokens an automatic-prefix cache can return for a prefix shared with a live earlier
    request: nothing below the model's minimum, and a multiple of its hit granularity (128
    tokens for in-memory caching up to GPT-5.4) at most."""
    if shared_prefix_tokens < 0:
        raise ValueError("a shared prefix cannot be negative")
    minimum = model.min_cacheable_tokens or 0
    if shared_prefix_tokens < minimum:
        return 0
    step = model.hit_granularity_tokens
    return shared_prefix_tokens - shared_prefix_tokens % step if step else shared_prefix_tokens
