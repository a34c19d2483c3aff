"""Raw provider usage payloads -> `Usage`. One function per wire API.

Containment differs by API and is the source of most accounting bugs:

- Anthropic Messages: `input_tokens` EXCLUDES cache reads and writes; the prompt is
  `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`
  (`hitrate.store.normalize_anthropic`).
- OpenAI Chat / Responses, Gemini, vLLM, SGLang, llama.cpp: the prompt count INCLUDES cached
  tokens (and, on OpenAI GPT-5.6+, written tokens), so fresh input is a subtraction.
- DeepSeek: `prompt_cache_hit_tokens + prompt_cache_miss_tokens == prompt_tokens`.

Payloads may be plain dicts (parsed JSON) or SDK objects with `model_dump()`. A field that is
absent or null stays `None` in the result unless the wire format itself defines absence as zero
(noted where that applies). No payload makes these functions raise: the provider billed the call
whatever its usage says, so a contradiction is read as well as it can be and named in
`Usage.flags` (codes in `hitrate.store.usage_reader`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from hitrate.store.normalize_anthropic import anthropic_stream_usage, from_anthropic, merge_anthropic_stream
from hitrate.store.usage import WRITE_BUCKETS, Usage
from hitrate.store.usage_reader import UNREADABLE_KEY, UsageReader

OpenAIWriteTTL = Literal["30m", "12h"]

# Providers whose cache fills itself at no extra charge: no token is ever billed as a write, so every
# write bucket is known to be 0 (not unknown).
_FREE_WRITES: dict[str, int] = dict.fromkeys(WRITE_BUCKETS, 0)

__all__ = [
    "as_raw_usage",
    "anthropic_stream_usage",
    "from_anthropic",
    "merge_anthropic_stream",
    "from_openai_chat",
    "from_openai_responses",
    "from_deepseek",
    "from_gemini",
    "from_gemini_openai",
    "from_openai_compatible",
    "from_openrouter",
]


def as_raw_usage(payload: Any) -> dict[str, Any]:
    """A usage payload as the JSON object a ledger row stores, whatever arrived: a dict as is, an
    SDK object as its JSON dump (extra fields kept), nothing as {}, and anything else (a list, a
    string, an object that cannot be dumped) under "unreadable_usage", so the raw payload is never
    dropped and never makes the call fail; the normalizers flag such a payload."""
    if payload is None:
        return {}
    if isinstance(payload, Mapping):
        return dict(payload)
    try:
        if hasattr(payload, "to_dict"):
            dumped = payload.to_dict(mode="json")
        elif hasattr(payload, "model_dump"):
            dumped = payload.model_dump(mode="json")
        else:
            dumped = payload
    except Exception:  # a half-built SDK object must not cost the call its row
        return {UNREADABLE_KEY: repr(payload)}
    if isinstance(dumped, Mapping):
        return dict(dumped)
    try:
        json.dumps(dumped)
        return {UNREADABLE_KEY: dumped}
    except (TypeError, ValueError):
        return {UNREADABLE_KEY: repr(dumped)}


# --------------------------------------------------------------------------------------------
# OpenAI Chat Completions and Responses
# --------------------------------------------------------------------------------------------


def from_openai_chat(usage: Mapping[str, Any] | Any, *, writes_billed: bool, write_ttl: OpenAIWriteTTL = "30m") -> Usage:
    """OpenAI Chat Completions `usage`.

    `prompt_tokens` includes `prompt_tokens_details.cached_tokens`. Up to GPT-5.5 writes are free
    and unreported (`writes_billed=False`): every uncached token is fresh. From GPT-5.6 writes are
    billed at the write rate and reported as `prompt_tokens_details.cache_write_tokens`, also a
    subset of `prompt_tokens` (`writes_billed=True`). Pass the model's flag from the price table
    (`PriceTable.writes_billed(model)`). Chat usage does not split writes by TTL, so they are
    booked under `write_ttl`, the retention the request asked for (`prompt_cache_options.ttl`).

    An absent `cached_tokens` stays unknown: OpenAI's prompt-caching guide says every request shows
    the field, zero when nothing was cached (even below the 1,024-token minimum), so a usage block
    without it comes from a server that does not follow that contract, and 0 would be a guess.
    """
    _check_ttl(write_ttl)
    r = UsageReader("OpenAI chat")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    details = r.sub(u, "prompt_tokens_details")
    return _openai_split(
        r,
        prompt=r.count(u, "prompt_tokens"),
        cached=r.count(details, "cached_tokens", "usage.prompt_tokens_details"),
        written=r.count(details, "cache_write_tokens", "usage.prompt_tokens_details"),
        write_split={},
        output=r.count(u, "completion_tokens"),
        reasoning=r.count(r.sub(u, "completion_tokens_details"), "reasoning_tokens", "usage.completion_tokens_details"),
        total=r.count(u, "total_tokens"),
        writes_billed=writes_billed,
        write_ttl=write_ttl,
    )


def from_openai_responses(
    usage: Mapping[str, Any] | Any, *, writes_billed: bool, write_ttl: OpenAIWriteTTL = "30m"
) -> Usage:
    """OpenAI Responses `usage`: same rules as Chat, named `input_tokens` /
    `input_tokens_details.{cached_tokens,cache_write_tokens}` / `output_tokens` /
    `output_tokens_details.reasoning_tokens`. Responses also splits writes by retention in
    `input_tokens_details.cache_write_tokens_details.{ttl_30m_tokens,ttl_12h_tokens}`; without
    that split the writes are booked under `write_ttl`."""
    _check_ttl(write_ttl)
    r = UsageReader("OpenAI responses")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    details = r.sub(u, "input_tokens_details")
    return _openai_split(
        r,
        prompt=r.count(u, "input_tokens"),
        cached=r.count(details, "cached_tokens", "usage.input_tokens_details"),
        written=r.count(details, "cache_write_tokens", "usage.input_tokens_details"),
        write_split=r.sub(details, "cache_write_tokens_details"),
        output=r.count(u, "output_tokens"),
        reasoning=r.count(r.sub(u, "output_tokens_details"), "reasoning_tokens", "usage.output_tokens_details"),
        total=r.count(u, "total_tokens"),
        writes_billed=writes_billed,
        write_ttl=write_ttl,
    )


def _check_ttl(write_ttl: str) -> None:
    # A caller's mistake, not a payload surprise: this one raises.
    if write_ttl not in ("30m", "12h"):
        raise ValueError(f"write_ttl must be '30m' or '12h', not {write_ttl!r}")


def _openai_split(
    r: UsageReader,
    *,
    prompt: int | None,
    cached: int | None,
    written: int | None,
    write_split: Mapping[str, Any],
    output: int | None,
    reasoning: int | None,
    total: int | None,
    writes_billed: bool,
    write_ttl: OpenAIWriteTTL,
) -> Usage:
    if writes_billed:
        w30, w12 = _openai_write_classes(r, written, write_split, write_ttl)
        written = None if w30 is None or w12 is None else w30 + w12
    else:
        # Up to GPT-5.5 a write costs nothing extra: the written tokens are billed as plain input
        # inside prompt_tokens. A positive write count here means the model's flag is wrong; the
        # price table decides the bill, the payload is kept raw and the row flagged.
        if written:
            r.flag(
                "unexpected_cache_write_tokens",
                f"cache_write_tokens={written} on a model whose writes the price table says are free; "
                "billed as fresh input (check the model name / price table)",
            )
        w30 = w12 = written = 0
    # GPT-5.6+: fresh = prompt - cached - written. Billing prompt_tokens at the input rate plus
    # cache_write_tokens at the write rate would count the writes twice.
    fresh, read, prompt_total = r.inclusive_split(prompt, cached, "prompt", "cached_tokens")
    if fresh is not None and prompt_total is not None:
        if written is None:
            fresh = None
        elif written > fresh:
            room = fresh
            r.flag(
                "cache_write_exceeds_uncached",
                f"cached_tokens={cached} + cache_write_tokens={written} > prompt={prompt}; writes capped at "
                f"the {room} uncached tokens, fresh = 0",
            )
            assert w30 is not None and w12 is not None
            w12 = min(w12, room)
            w30 = room - w12
            fresh = 0
        else:
            fresh -= written
    implied = total - prompt if total is not None and prompt is not None and total >= prompt else None
    return r.build(
        fresh_input=fresh,
        cache_write_5m=0,
        cache_write_30m=w30,
        cache_write_1h=0,
        cache_write_12h=w12,
        cache_read=read,
        output=r.output_with_reasoning(output, reasoning, implied),
        reasoning=reasoning,
        prompt_total=prompt_total,
    )


def _openai_write_classes(
    r: UsageReader, written: int | None, split: Mapping[str, Any], write_ttl: OpenAIWriteTTL
) -> tuple[int | None, int | None]:
    """(30m, 12h) write counts from the retention split, else all under the requested TTL."""
    where = "usage.input_tokens_details.cache_write_tokens_details"
    w30 = r.count(split, "ttl_30m_tokens", where)
    w12 = r.count(split, "ttl_12h_tokens", where)
    if w30 is None and w12 is None:
        if written is None:
            return None, None
        return (written, 0) if write_ttl == "30m" else (0, written)
    if written is None:
        return (w30 or 0), (w12 or 0)
    if write_ttl == "30m":
        return r.complete_pair(("cache_write_tokens", written), ("30m", "ttl_30m_tokens", w30), ("12h", "ttl_12h_tokens", w12))
    w12, w30 = r.complete_pair(("cache_write_tokens", written), ("12h", "ttl_12h_tokens", w12), ("30m", "ttl_30m_tokens", w30))
    return w30, w12


# --------------------------------------------------------------------------------------------
# DeepSeek
# --------------------------------------------------------------------------------------------


def from_deepseek(usage: Mapping[str, Any] | Any) -> Usage:
    """DeepSeek chat `usage`: `prompt_cache_hit_tokens + prompt_cache_miss_tokens = prompt_tokens`.

    The cache fills itself for free, so no token is ever billed as a write. When the hit/miss
    pair is absent, the OpenAI-style `prompt_tokens_details.cached_tokens` (which DeepSeek also
    sends) is used instead. The hit/miss pair is what DeepSeek bills, so when it disagrees with
    `prompt_tokens` the pair is kept (flagged).
    """
    r = UsageReader("DeepSeek")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    prompt = r.count(u, "prompt_tokens")
    hit = r.count(u, "prompt_cache_hit_tokens")
    miss = r.count(u, "prompt_cache_miss_tokens")
    prompt_total = prompt
    if hit is None and miss is None:
        cached = r.count(r.sub(u, "prompt_tokens_details"), "cached_tokens", "usage.prompt_tokens_details")
        if cached is not None and prompt is not None:
            miss, hit, prompt_total = r.inclusive_split(prompt, cached, "prompt_tokens", "cached_tokens")
    elif hit is not None and miss is None and prompt is not None:
        miss, hit, prompt_total = r.inclusive_split(prompt, hit, "prompt_tokens", "prompt_cache_hit_tokens")
    elif miss is not None and hit is None and prompt is not None:
        if miss <= prompt:
            hit = prompt - miss
        else:
            r.flag("cached_exceeds_prompt", f"prompt_cache_miss_tokens={miss} > prompt_tokens={prompt}; hits read as unknown")
            prompt_total = None
    elif hit is not None and miss is not None and prompt is not None and hit + miss != prompt:
        r.flag(
            "prompt_split_mismatch",
            f"prompt_cache_hit_tokens={hit} + prompt_cache_miss_tokens={miss} != prompt_tokens={prompt}; "
            "the hit/miss split is billed as reported",
        )
        prompt_total = None
    output, reasoning = _chat_completion(r, u, prompt)
    return r.build(
        fresh_input=miss,
        **_FREE_WRITES,
        cache_read=hit,
        output=output,
        reasoning=reasoning,
        prompt_total=prompt_total,
    )


def _chat_completion(r: UsageReader, u: Mapping[str, Any], prompt: int | None) -> tuple[int | None, int | None]:
    """Output (reasoning included) and reasoning of a Chat Completions-shaped usage: `completion_tokens`
    with its `completion_tokens_details.reasoning_tokens`, checked against `total_tokens - prompt`."""
    output = r.count(u, "completion_tokens")
    reasoning = r.count(r.sub(u, "completion_tokens_details"), "reasoning_tokens", "usage.completion_tokens_details")
    total = r.count(u, "total_tokens")
    implied = total - prompt if total is not None and prompt is not None and total >= prompt else None
    return r.output_with_reasoning(output, reasoning, implied), reasoning


# --------------------------------------------------------------------------------------------
# Gemini
# --------------------------------------------------------------------------------------------


def from_gemini(usage_metadata: Mapping[str, Any] | Any) -> Usage:
    """Gemini native `usageMetadata` (REST camelCase or Python SDK snake_case).

    `promptTokenCount` includes `cachedContentTokenCount`. The response is proto3 JSON, which
    omits fields whose value is 0, so an absent cached/candidates/thoughts/tool-use count is 0
    (Google documents cachedContentTokenCount as 0 when nothing was cached); an absent
    `promptTokenCount` stays unknown. Thinking (`thoughtsTokenCount`) is billed as output but is
    not part of `candidatesTokenCount`, so output = candidates + thoughts. Tool-use prompt tokens
    (results of built-in tools fed back to the model) are input outside `promptTokenCount`,
    billed at the input rate, so they join fresh input. Implicit cache writes are free; an
    explicit CachedContent is billed when it is created and rents storage by the hour, neither of
    which belongs to this request.
    """
    r = UsageReader("Gemini")
    u = r.mapping(usage_metadata, "usageMetadata")
    if u is None:
        return r.build()
    prompt = r.count_alias(u, "promptTokenCount", "prompt_token_count")
    cached = r.count_alias(u, "cachedContentTokenCount", "cached_content_token_count") or 0
    candidates = r.count_alias(u, "candidatesTokenCount", "candidates_token_count") or 0
    thoughts = r.count_alias(u, "thoughtsTokenCount", "thoughts_token_count") or 0
    tool_use = r.count_alias(u, "toolUsePromptTokenCount", "tool_use_prompt_token_count") or 0
    fresh, read, prompt_total = r.inclusive_split(prompt, cached, "promptTokenCount", "cachedContentTokenCount")
    return r.build(
        fresh_input=None if fresh is None else fresh + tool_use,
        **_FREE_WRITES,
        cache_read=None if prompt is None else read,
        output=candidates + thoughts,
        reasoning=thoughts,
        prompt_total=None if prompt_total is None else prompt_total + tool_use,
    )


def from_gemini_openai(usage: Mapping[str, Any] | Any, *, absent_cached_means_zero: bool = True) -> Usage:
    """Gemini through its OpenAI-compatible endpoint (Chat Completions shape).

    Two quirks: `prompt_tokens_details` is left out when nothing was read from the cache
    (implicit caching is always on and the field appears on hits), so absent means 0 here; and
    thinking tokens have been seen counted in `total_tokens` and `reasoning_tokens` but not in
    `completion_tokens` (e.g. completion 0, reasoning 60, prompt 21, total 81). Thinking is billed
    as output, so output is the larger of `completion_tokens` and `total_tokens - prompt_tokens`;
    this repair comes before any consistency check, since it is the documented shape, not a
    contradiction. Pass `absent_cached_means_zero=False` to keep a missing cached count unknown.
    """
    r = UsageReader("Gemini OpenAI-compatible")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    prompt = r.count(u, "prompt_tokens")
    output = r.count(u, "completion_tokens")
    total = r.count(u, "total_tokens")
    implied: int | None = None
    if total is not None and prompt is not None:
        if total >= prompt:
            implied = total - prompt
            if output is None or implied > output:
                output = implied
        else:
            r.flag("total_below_prompt", f"total_tokens={total} < prompt_tokens={prompt}; total ignored")
    return _compatible_usage(r, u, prompt, output, implied, absent_cached_means_zero, timings=None)


# --------------------------------------------------------------------------------------------
# OpenRouter
# --------------------------------------------------------------------------------------------

OpenRouterWriteTTL = Literal["5m", "30m", "1h"]


def from_openrouter(usage: Mapping[str, Any] | Any, *, write_ttl: OpenRouterWriteTTL | str = "5m") -> Usage:
    """OpenRouter's Chat Completions `usage` (its "usage accounting", sent with every response).

    Counts are the upstream model's own tokenizer's. `prompt_tokens` includes
    `prompt_tokens_details.cached_tokens` (read from the cache) and
    `prompt_tokens_details.cache_write_tokens` (written this request, billed at the upstream's
    write rate, e.g. Anthropic's 1.25x for 5m), so fresh input is prompt - cached - written. The
    writes are not split by TTL; they are booked under `write_ttl`, the TTL the request's marks
    asked for. A missing `cache_write_tokens` is 0: OpenRouter documents the detail block on every
    response and leaves out counts that are 0. The `cost` (credits, USD) and `cost_details` stay in
    the raw usage the ledger keeps.
    """
    bucket = {"5m": "cache_write_5m", "30m": "cache_write_30m", "1h": "cache_write_1h"}.get(write_ttl)
    if bucket is None:
        raise ValueError(f"write_ttl must be '5m', '30m' or '1h', not {write_ttl!r}")
    r = UsageReader("OpenRouter")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    prompt = r.count(u, "prompt_tokens")
    details = r.sub(u, "prompt_tokens_details")
    cached = r.count(details, "cached_tokens", "usage.prompt_tokens_details")
    written = r.count(details, "cache_write_tokens", "usage.prompt_tokens_details")
    if prompt is not None and isinstance(details, Mapping):
        cached = 0 if cached is None else cached
        written = 0 if written is None else written
    fresh, read, prompt_total = r.inclusive_split(prompt, cached, "prompt_tokens", "cached_tokens")
    if fresh is not None and written is not None:
        if written > fresh:
            r.flag(
                "cache_write_exceeds_uncached",
                f"cached_tokens={cached} + cache_write_tokens={written} > prompt_tokens={prompt}; writes capped at {fresh}",
            )
            written = fresh
        fresh -= written
    elif written is None:
        fresh = None
    writes: dict[str, int | None] = dict.fromkeys(WRITE_BUCKETS, 0)
    writes[bucket] = written
    output, reasoning = _chat_completion(r, u, prompt)
    return r.build(
        fresh_input=fresh,
        **writes,
        cache_read=read,
        output=output,
        reasoning=reasoning,
        prompt_total=prompt_total,
    )


# --------------------------------------------------------------------------------------------
# Self-hosted OpenAI-compatible servers: vLLM, SGLang, llama.cpp, Ollama
# --------------------------------------------------------------------------------------------


def from_openai_compatible(
    usage: Mapping[str, Any] | Any,
    *,
    absent_cached_means_zero: bool = False,
    timings: Mapping[str, Any] | None = None,
) -> Usage:
    """Chat Completions `usage` from a self-hosted OpenAI-compatible server.

    `prompt_tokens` includes `prompt_tokens_details.cached_tokens` when that is reported, but:
    vLLM sends it only with `--enable-prompt-tokens-details` and then drops it when it is 0
    (a truthiness check); SGLang only with `--enable-cache-report`; Ollama never. So by default
    an absent cached count is unknown: `cache_read` and `fresh_input` are None and only
    `prompt_total` is kept. Pass `absent_cached_means_zero=True` when the server is known to
    report the field whenever it is non-zero (vLLM started with the flag, llama.cpp).
    llama.cpp's `timings.cache_n` (prompt tokens reused from its cache) is used when the usage
    block lacks the field. These servers bill nothing as a cache write; the `cache_write_tokens`
    some llama.cpp builds emit is prompt - cached, i.e. our fresh input, and subtracting it
    again would count those tokens twice, so it is ignored.
    """
    r = UsageReader("OpenAI-compatible")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    prompt = r.count(u, "prompt_tokens")
    total = r.count(u, "total_tokens")
    implied = total - prompt if total is not None and prompt is not None and total >= prompt else None
    return _compatible_usage(r, u, prompt, r.count(u, "completion_tokens"), implied, absent_cached_means_zero, timings)


def _compatible_usage(
    r: UsageReader,
    u: Mapping[str, Any],
    prompt: int | None,
    output: int | None,
    implied: int | None,
    absent_cached_means_zero: bool,
    timings: Mapping[str, Any] | None,
) -> Usage:
    cached = r.count(r.sub(u, "prompt_tokens_details"), "cached_tokens", "usage.prompt_tokens_details")
    if cached is None and timings is not None:
        timing_block = r.mapping(timings, "llama.cpp timings")
        if timing_block is not None:
            cached = r.count(timing_block, "cache_n", "timings")
    if cached is None and absent_cached_means_zero:
        cached = 0
    fresh, read, prompt_total = r.inclusive_split(prompt, cached, "prompt_tokens", "cached_tokens")
    reasoning = r.count(r.sub(u, "completion_tokens_details"), "reasoning_tokens", "usage.completion_tokens_details")
    return r.build(
        fresh_input=fresh,
        **_FREE_WRITES,
        cache_read=read,
        output=r.output_with_reasoning(output, reasoning, implied),
        reasoning=reasoning,
        prompt_total=prompt_total,
    )
