"""Raw provider usage payloads -> `Usage`. One function per wire API.

Containment differs by API and is the source of most accounting bugs:

- Anthropic Messages: `input_tokens` EXCLUDES cache reads and writes; the prompt is
  `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`.
- OpenAI Chat / Responses, Gemini, vLLM, SGLang, llama.cpp: the prompt count INCLUDES cached
  tokens (and, on OpenAI GPT-5.6+, written tokens), so fresh input is a subtraction.
- DeepSeek: `prompt_cache_hit_tokens + prompt_cache_miss_tokens == prompt_tokens`.

Payloads may be plain dicts (parsed JSON) or SDK objects with `model_dump()`. A field that is
absent or null stays `None` in the result unless the wire format itself defines absence as zero
(noted where that applies). Contradictory payloads raise `UsageFormatError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ValidationError

from hitrate.store.usage import WRITE_BUCKETS, Usage, UsageFormatError

OpenAIWriteTTL = Literal["30m", "12h"]

# Providers whose cache fills itself at no extra charge: no token is ever billed as a write, so every
# write bucket is known to be 0 (not unknown).
_FREE_WRITES: dict[str, int] = dict.fromkeys(WRITE_BUCKETS, 0)

__all__ = [
    "from_anthropic",
    "merge_anthropic_stream",
    "from_openai_chat",
    "from_openai_responses",
    "from_deepseek",
    "from_gemini",
    "from_gemini_openai",
    "from_openai_compatible",
]


# --------------------------------------------------------------------------------------------
# Anthropic Messages
# --------------------------------------------------------------------------------------------


def from_anthropic(usage: Mapping[str, Any] | Any) -> Usage:
    """Anthropic Messages `usage` (non-streaming, or merged from a stream).

    `input_tokens` counts only the tokens after the last cache breakpoint, so it maps to
    `fresh_input` as is. `cache_creation_input_tokens` must NEVER be added to it (LiteLLM once
    did, BerriAI/litellm#9812, billing writes twice).
    """
    u = _mapping(usage, "Anthropic usage")
    fresh = _count(u, "input_tokens")
    read = _count(u, "cache_read_input_tokens")
    created = _count(u, "cache_creation_input_tokens")

    split = u.get("cache_creation")
    w5: int | None
    w1h: int | None
    if isinstance(split, Mapping) and any(split.get(k) is not None for k in _ANTHROPIC_TTL_KEYS):
        where = "Anthropic cache_creation"
        w5, w1h = _complete_pair(
            where,
            ("cache_creation_input_tokens", created),
            ("5m", "ephemeral_5m_input_tokens", _count(split, "ephemeral_5m_input_tokens", where)),
            ("1h", "ephemeral_1h_input_tokens", _count(split, "ephemeral_1h_input_tokens", where)),
        )
    elif created is not None:
        # No TTL split (older API versions, Anthropic-compatible servers): everything written is
        # 5m, the default and, before 1h existed, the only TTL.
        w5, w1h = created, 0
    else:
        w5 = w1h = None

    writes_known = w5 is not None or w1h is not None
    return _build(
        "Anthropic",
        fresh_input=fresh,
        cache_write_5m=w5,
        # Anthropic has no 30-minute or 12-hour class: zero whenever writes are reported at all.
        cache_write_30m=0 if writes_known else None,
        cache_write_1h=w1h,
        cache_write_12h=0 if writes_known else None,
        cache_read=read,
        output=_count(u, "output_tokens"),
        # Thinking is billed inside output_tokens; newer API versions also report how much of it
        # was thinking in output_tokens_details (a breakdown, not an addition).
        reasoning=_count(_sub(u, "output_tokens_details"), "thinking_tokens", "Anthropic output_tokens_details"),
    )


_ANTHROPIC_TTL_KEYS = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")


def merge_anthropic_stream(
    message_start_usage: Mapping[str, Any] | Any, message_delta_usage: Mapping[str, Any] | Any
) -> dict[str, Any]:
    """Combine the `usage` of a stream's `message_start` and final `message_delta` events.

    The official SDK's rule is the base: every non-null field of `message_delta` overrides
    `message_start` (nested `cache_creation` field by field), because the delta carries the final,
    cumulative counts. Two real servers disagree in opposite directions, so the prompt counts
    (input, cache write, cache read) are taken from the delta as a group, and only when the group
    says something:
    - the bundled engine (and other servers that learn their cache split only when generation
      ends) send the whole prompt as `input_tokens` in `message_start` and the exact split in the
      delta: the delta must win, or cached tokens would be counted as fresh input;
    - some proxies send `0` placeholders for the prompt counts in the delta: a delta whose prompt
      counts are all zero or absent says nothing, and the start's counts stand.
    """
    start = _mapping(message_start_usage, "Anthropic message_start usage")
    delta = _mapping(message_delta_usage, "Anthropic message_delta usage")
    delta_prompt_total = sum(
        value for key, value in delta.items() if key in _ANTHROPIC_PROMPT_COUNTS and _is_number(value)
    )
    merged: dict[str, Any] = dict(start)
    for key, value in delta.items():
        if value is None:
            continue
        if (key in _ANTHROPIC_PROMPT_COUNTS or key == "cache_creation") and delta_prompt_total == 0:
            continue  # a placeholder prompt split: keep message_start's
        if isinstance(value, Mapping):
            inner = dict(merged[key]) if isinstance(merged.get(key), Mapping) else {}
            inner.update({k: v for k, v in value.items() if v is not None})
            merged[key] = inner
        else:
            merged[key] = value
    return merged


_ANTHROPIC_PROMPT_COUNTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


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
    """
    u = _mapping(usage, "OpenAI chat usage")
    details = _sub(u, "prompt_tokens_details")
    out_details = _sub(u, "completion_tokens_details")
    return _openai_split(
        "OpenAI chat",
        prompt=_count(u, "prompt_tokens"),
        cached=_count(details, "cached_tokens"),
        written=_count(details, "cache_write_tokens"),
        write_split={},
        output=_count(u, "completion_tokens"),
        reasoning=_count(out_details, "reasoning_tokens"),
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
    u = _mapping(usage, "OpenAI responses usage")
    details = _sub(u, "input_tokens_details")
    out_details = _sub(u, "output_tokens_details")
    return _openai_split(
        "OpenAI responses",
        prompt=_count(u, "input_tokens"),
        cached=_count(details, "cached_tokens"),
        written=_count(details, "cache_write_tokens"),
        write_split=_sub(details, "cache_write_tokens_details"),
        output=_count(u, "output_tokens"),
        reasoning=_count(out_details, "reasoning_tokens"),
        writes_billed=writes_billed,
        write_ttl=write_ttl,
    )


def _openai_split(
    api: str,
    *,
    prompt: int | None,
    cached: int | None,
    written: int | None,
    write_split: Mapping[str, Any],
    output: int | None,
    reasoning: int | None,
    writes_billed: bool,
    write_ttl: OpenAIWriteTTL,
) -> Usage:
    if prompt is not None and cached is not None and cached > prompt:
        raise UsageFormatError(f"{api}: cached_tokens={cached} exceeds the prompt count {prompt}")
    if write_ttl not in ("30m", "12h"):
        raise ValueError(f"write_ttl must be '30m' or '12h', not {write_ttl!r}")
    if writes_billed:
        w30, w12 = _openai_write_classes(api, written, write_split, write_ttl)
        if written is None and w30 is not None and w12 is not None:
            written = w30 + w12
        # GPT-5.6+: fresh = prompt - cached - written. Billing prompt_tokens at the input rate
        # plus cache_write_tokens at the write rate would count the writes twice.
        if prompt is not None and cached is not None and written is not None:
            fresh: int | None = prompt - cached - written
            if fresh < 0:
                raise UsageFormatError(
                    f"{api}: cached_tokens={cached} + cache_write_tokens={written} exceed the prompt count {prompt}"
                )
        else:
            fresh = None
    else:
        # Up to GPT-5.5 a write costs nothing extra: the written tokens are billed as plain input
        # inside prompt_tokens. A positive write count here means the model's flag is wrong.
        if written:
            raise UsageFormatError(
                f"{api}: payload reports cache_write_tokens={written} but writes_billed=False; "
                "the model's price entry says writes are free (check the model name / price table)"
            )
        w30 = w12 = 0
        fresh = prompt - cached if prompt is not None and cached is not None else None
    return _build(
        api,
        fresh_input=fresh,
        cache_write_5m=0,
        cache_write_30m=w30,
        cache_write_1h=0,
        cache_write_12h=w12,
        cache_read=cached,
        output=output,
        reasoning=reasoning,
        prompt_total=prompt,
    )


def _openai_write_classes(
    api: str, written: int | None, split: Mapping[str, Any], write_ttl: OpenAIWriteTTL
) -> tuple[int | None, int | None]:
    """(30m, 12h) write counts from the retention split, else all under the requested TTL."""
    where = f"{api} cache_write_tokens_details"
    w30 = _count(split, "ttl_30m_tokens", where)
    w12 = _count(split, "ttl_12h_tokens", where)
    if w30 is None and w12 is None:
        if written is None:
            return None, None
        return (written, 0) if write_ttl == "30m" else (0, written)
    return _complete_pair(api, ("cache_write_tokens", written), ("30m", "ttl_30m_tokens", w30), ("12h", "ttl_12h_tokens", w12))


# --------------------------------------------------------------------------------------------
# DeepSeek
# --------------------------------------------------------------------------------------------


def from_deepseek(usage: Mapping[str, Any] | Any) -> Usage:
    """DeepSeek chat `usage`: `prompt_cache_hit_tokens + prompt_cache_miss_tokens = prompt_tokens`.

    The cache fills itself for free, so no token is ever billed as a write. When the hit/miss
    pair is absent, the OpenAI-style `prompt_tokens_details.cached_tokens` (which DeepSeek also
    sends) is used instead.
    """
    u = _mapping(usage, "DeepSeek usage")
    prompt = _count(u, "prompt_tokens")
    hit = _count(u, "prompt_cache_hit_tokens")
    miss = _count(u, "prompt_cache_miss_tokens")
    if hit is None and miss is None:
        cached = _count(_sub(u, "prompt_tokens_details"), "cached_tokens")
        if cached is not None and prompt is not None:
            if cached > prompt:
                raise UsageFormatError(f"DeepSeek: cached_tokens={cached} exceeds prompt_tokens={prompt}")
            hit, miss = cached, prompt - cached
    if hit is not None and miss is None and prompt is not None:
        miss = _non_negative(prompt - hit, "DeepSeek prompt_tokens - prompt_cache_hit_tokens")
    if miss is not None and hit is None and prompt is not None:
        hit = _non_negative(prompt - miss, "DeepSeek prompt_tokens - prompt_cache_miss_tokens")
    if hit is not None and miss is not None and prompt is not None and hit + miss != prompt:
        raise UsageFormatError(
            f"DeepSeek: prompt_cache_hit_tokens={hit} + prompt_cache_miss_tokens={miss} != prompt_tokens={prompt}"
        )
    return _build(
        "DeepSeek",
        fresh_input=miss,
        **_FREE_WRITES,
        cache_read=hit,
        output=_count(u, "completion_tokens"),
        reasoning=_count(_sub(u, "completion_tokens_details"), "reasoning_tokens"),
        prompt_total=prompt,
    )


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
    u = _mapping(usage_metadata, "Gemini usageMetadata")
    prompt = _count_alias(u, "promptTokenCount", "prompt_token_count")
    cached = _count_alias(u, "cachedContentTokenCount", "cached_content_token_count") or 0
    candidates = _count_alias(u, "candidatesTokenCount", "candidates_token_count") or 0
    thoughts = _count_alias(u, "thoughtsTokenCount", "thoughts_token_count") or 0
    tool_use = _count_alias(u, "toolUsePromptTokenCount", "tool_use_prompt_token_count") or 0
    if prompt is not None and cached > prompt:
        raise UsageFormatError(f"Gemini: cachedContentTokenCount={cached} exceeds promptTokenCount={prompt}")
    return _build(
        "Gemini",
        fresh_input=None if prompt is None else prompt - cached + tool_use,
        **_FREE_WRITES,
        cache_read=None if prompt is None else cached,
        output=candidates + thoughts,
        reasoning=thoughts,
        prompt_total=None if prompt is None else prompt + tool_use,
    )


def from_gemini_openai(usage: Mapping[str, Any] | Any, *, absent_cached_means_zero: bool = True) -> Usage:
    """Gemini through its OpenAI-compatible endpoint (Chat Completions shape).

    Two quirks: `prompt_tokens_details` is left out when nothing was read from the cache
    (implicit caching is always on and the field appears on hits), so absent means 0 here; and
    thinking tokens have been seen counted in `total_tokens` and `reasoning_tokens` but not in
    `completion_tokens`. Thinking is billed as output, so output is the larger of
    `completion_tokens` and `total_tokens - prompt_tokens`. Pass
    `absent_cached_means_zero=False` to keep a missing cached count unknown instead.
    """
    u = _mapping(usage, "Gemini OpenAI-compatible usage")
    base = from_openai_compatible(u, absent_cached_means_zero=absent_cached_means_zero)
    total = _count(u, "total_tokens")
    output = base.output
    if total is not None and base.prompt_total is not None:
        implied = total - base.prompt_total
        if output is None or implied > output:
            output = implied
    return _build("Gemini OpenAI-compatible", **{**base.buckets(), "output": output, "prompt_total": base.prompt_total})


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
    u = _mapping(usage, "OpenAI-compatible usage")
    prompt = _count(u, "prompt_tokens")
    cached = _count(_sub(u, "prompt_tokens_details"), "cached_tokens")
    if cached is None and timings is not None:
        cached = _count(_mapping(timings, "llama.cpp timings"), "cache_n")
    if cached is None and absent_cached_means_zero:
        cached = 0
    if prompt is not None and cached is not None and cached > prompt:
        raise UsageFormatError(f"OpenAI-compatible: cached_tokens={cached} exceeds prompt_tokens={prompt}")
    return _build(
        "OpenAI-compatible",
        fresh_input=prompt - cached if prompt is not None and cached is not None else None,
        **_FREE_WRITES,
        cache_read=cached,
        output=_count(u, "completion_tokens"),
        reasoning=_count(_sub(u, "completion_tokens_details"), "reasoning_tokens"),
        prompt_total=prompt,
    )


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _mapping(payload: Any, what: str) -> Mapping[str, Any]:
    if payload is not None and not isinstance(payload, Mapping) and hasattr(payload, "model_dump"):
        payload = payload.model_dump()
    if not isinstance(payload, Mapping):
        raise UsageFormatError(f"{what}: expected a JSON object, got {type(payload).__name__}")
    return payload


def _sub(u: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = u.get(key)
    if value is None:
        return {}
    return _mapping(value, key)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(u: Mapping[str, Any], key: str, where: str = "usage") -> int | None:
    value = u.get(key)
    if value is None:
        return None
    if not _is_number(value):
        raise UsageFormatError(f"{where}.{key} must be a token count, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise UsageFormatError(f"{where}.{key} must be a whole number, got {value!r}")
        value = int(value)
    if value < 0:
        raise UsageFormatError(f"{where}.{key} must not be negative, got {value}")
    return int(value)


def _count_alias(u: Mapping[str, Any], camel: str, snake: str) -> int | None:
    value = _count(u, camel)
    return value if value is not None else _count(u, snake)


def _non_negative(value: int, what: str) -> int:
    if value < 0:
        raise UsageFormatError(f"{what} is negative ({value})")
    return value


def _complete_pair(
    where: str,
    total: tuple[str, int | None],
    first: tuple[str, str, int | None],
    second: tuple[str, str, int | None],
) -> tuple[int | None, int | None]:
    """The two TTL parts of a write total, each given as (TTL, field name, count). A payload may name
    only one part: the other is whatever the total leaves over. Two given parts must add up to it."""
    total_name, whole = total
    (ttl_a, name_a, a), (ttl_b, name_b, b) = first, second
    if whole is None:
        return a, b
    if a is None and b is not None:
        a = _non_negative(whole - b, f"{where}: {total_name} - {name_b}")
    elif b is None and a is not None:
        b = _non_negative(whole - a, f"{where}: {total_name} - {name_a}")
    elif a is not None and b is not None and a + b != whole:
        raise UsageFormatError(f"{where}: split ({a} {ttl_a} + {b} {ttl_b}) does not add up to {total_name}={whole}")
    return a, b


def _build(api: str, **fields: int | None) -> Usage:
    try:
        return Usage(**fields)
    except ValidationError as exc:
        raise UsageFormatError(f"{api}: {exc.errors()[0]['msg']}") from exc
