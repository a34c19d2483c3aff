"""Anthropic Messages `usage` -> `Usage`, including streams and compaction iterations.

`input_tokens` EXCLUDES cache reads and writes; the prompt is `input_tokens +
cache_creation_input_tokens + cache_read_input_tokens` (prompt-caching guide).

Absent cache fields mean 0, not unknown. The API reference defines both cache counts on every
`Usage` object; the docs' own basic examples (requests without `cache_control`) leave them out,
and a request that carries no cache mark can neither read nor write the cache, so the count is
known to be 0. Servers that speak this wire without the same contract (a proxy that drops the
fields) can be read with `absent_cache_means_zero=False`, which keeps them unknown. The same rule
covers `server_tool_use`: the API reports it for requests that ran server tools, so its absence
means none ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hitrate.store.usage import Usage
from hitrate.store.usage_reader import UsageReader

_PROMPT_COUNTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_TTL_KEYS = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
_BILLED = ("fresh_input", "cache_write_5m", "cache_write_1h", "cache_read", "output")


def from_anthropic(usage: Mapping[str, Any] | Any, *, absent_cache_means_zero: bool = True) -> Usage:
    """Anthropic Messages `usage` (non-streaming, or merged from a stream by `merge_anthropic_stream`).

    `input_tokens` maps to `fresh_input` as is. `cache_creation_input_tokens` must NEVER be added to
    it (LiteLLM once did, BerriAI/litellm#9812, billing writes twice). A write total the TTL split
    does not cover (a stream whose final `message_delta` counts outgrew the split `message_start`
    sent; `MessageDeltaUsage` has no split) has its remainder billed at the 5-minute rate, the rule
    for writes reported without a split, and is flagged.

    Compaction (`compact-2026-01-12` beta): the top-level counts exclude `usage.iterations` entries
    of type "compaction" (SDK `BetaIterationsUsage`: "A `compaction` entry's tokens are not included
    in the top-level `usage` fields"; the compaction guide's example bills 180,000 + 23,000 input),
    so they are added to the buckets; "message" entries are the turns already in the top-level
    counts. Sources: platform.claude.com/docs/en/build-with-claude/compaction and anthropic-sdk-python
    2.15 `types/beta/beta_iterations_usage.py`, both seen 2026-12-01.
    """
    r = UsageReader("Anthropic")
    u = r.mapping(usage, "usage")
    if u is None:
        return r.build()
    zero = 0 if absent_cache_means_zero else None
    buckets = _read_counts(r, u, "usage", zero)
    buckets = _add_compaction_iterations(r, u, buckets, zero)

    output = buckets["output"]
    reasoning = r.count(r.sub(u, "output_tokens_details"), "thinking_tokens", "usage.output_tokens_details")
    if reasoning is not None and output is not None and reasoning > output:
        # The SDK documents output_tokens as "the inclusive, authoritative total used for billing"
        # and thinking_tokens as always <= it: the bill stands, the breakdown is dropped.
        r.flag(
            "reasoning_exceeds_output",
            f"thinking_tokens={reasoning} > output_tokens={output}; output_tokens is the billed total, "
            "thinking read as unknown",
        )
        reasoning = None

    tools = u.get("server_tool_use")
    tool_counts = r.sub(u, "server_tool_use")
    absent_tools = zero if tools is None else None
    search = r.count(tool_counts, "web_search_requests", "usage.server_tool_use")
    fetch = r.count(tool_counts, "web_fetch_requests", "usage.server_tool_use")
    writes_known = buckets["cache_write_5m"] is not None or buckets["cache_write_1h"] is not None
    return r.build(
        **buckets,
        # Anthropic has no 30-minute or 12-hour class: zero whenever writes are reported at all.
        cache_write_30m=0 if writes_known else None,
        cache_write_12h=0 if writes_known else None,
        reasoning=reasoning,
        web_search_requests=search if search is not None else absent_tools,
        web_fetch_requests=fetch if fetch is not None else absent_tools,
        inference_geo=r.text(u, "inference_geo"),
        speed=r.text(u, "speed"),
        service_tier=r.text(u, "service_tier"),
    )


def _read_counts(r: UsageReader, u: Mapping[str, Any], where: str, zero: int | None) -> dict[str, int | None]:
    """The billed buckets of one usage object (the top level, or one iteration)."""
    fresh = r.count(u, "input_tokens", where)
    read = r.count(u, "cache_read_input_tokens", where)
    created = r.count(u, "cache_creation_input_tokens", where)
    split = r.sub(u, "cache_creation")
    split_where = f"{where}.cache_creation"
    w5 = r.count(split, "ephemeral_5m_input_tokens", split_where)
    w1h = r.count(split, "ephemeral_1h_input_tokens", split_where)
    if w5 is not None or w1h is not None:
        if created is None and (w5 is None or w1h is None):
            w5, w1h = (w5 if w5 is not None else zero), (w1h if w1h is not None else zero)
        else:
            w5, w1h = r.complete_pair(
                ("cache_creation_input_tokens", created),
                ("5m", "ephemeral_5m_input_tokens", w5),
                ("1h", "ephemeral_1h_input_tokens", w1h),
            )
    elif created is not None:
        # No TTL split (older API versions, Anthropic-compatible servers, every message_delta):
        # everything written is 5m, the default and, before 1h existed, the only TTL.
        w5, w1h = created, 0
    elif u.get("cache_creation_input_tokens") is None:
        w5 = w1h = zero  # absent or null: see the module docstring
    else:
        w5 = w1h = None  # present but unreadable (flagged): unknown
    if read is None and u.get("cache_read_input_tokens") is None:
        read = zero
    return {
        "fresh_input": fresh,
        "cache_write_5m": w5,
        "cache_write_1h": w1h,
        "cache_read": read,
        "output": r.count(u, "output_tokens", where),
    }


def _add_compaction_iterations(
    r: UsageReader, u: Mapping[str, Any], buckets: dict[str, int | None], zero: int | None
) -> dict[str, int | None]:
    iterations = u.get("iterations")
    if iterations is None:
        return buckets
    if not isinstance(iterations, list):
        r.flag("bad_field", f"usage.iterations = {type(iterations).__name__}, not a list; ignored")
        return buckets
    total = dict(buckets)
    for i, item in enumerate(iterations):
        entry = r.mapping(item, f"usage.iterations[{i}]")
        if entry is None:
            continue
        kind = entry.get("type")
        if kind in ("message", "fallback_message"):
            continue  # sampling turns the top-level counts already hold
        if kind != "compaction":
            r.flag("iteration_not_billed_here", f"usage.iterations[{i}] of type {kind!r} is not priced by this ledger")
            continue
        counts = _read_counts(r, entry, f"usage.iterations[{i}]", zero)
        for bucket in _BILLED:
            have, extra = total[bucket], counts[bucket]
            total[bucket] = None if have is None or extra is None else have + extra
    return total


def merge_anthropic_stream(
    message_start_usage: Mapping[str, Any] | Any, message_delta_usage: Mapping[str, Any] | Any
) -> dict[str, Any]:
    """Combine the `usage` of a stream's `message_start` and final `message_delta` events.

    The official SDK's rule is the base: every non-null field of `message_delta` overrides
    `message_start` (nested objects field by field), because the delta carries the final,
    cumulative counts (`MessageDeltaUsage`: "The cumulative number of input tokens…"; the
    documented web-search stream starts at input 2,679 and ends at 10,682). Two real servers
    disagree in opposite directions, so the prompt counts (input, cache write, cache read) are
    taken from the delta as a group, and only when the group says something:
    - the bundled engine (and other servers that learn their cache split only when generation
      ends) send the whole prompt as `input_tokens` in `message_start` and the exact split in the
      delta: the delta must win, or cached tokens would be counted as fresh input;
    - some proxies send `0` placeholders for the prompt counts in the delta: a delta whose prompt
      counts are all zero or absent says nothing, and the start's counts stand (a count the start
      did not send is still taken from the delta, so nothing that arrived is dropped).
    A payload that is not an object counts as empty here; `from_anthropic` flags what it cannot read.
    """
    start = _as_dict(message_start_usage)
    delta = _as_dict(message_delta_usage)
    delta_prompt_total = sum(
        value for key, value in delta.items() if key in _PROMPT_COUNTS and _is_number(value)
    )
    merged: dict[str, Any] = dict(start)
    for key, value in delta.items():
        if value is None:
            continue
        if (key in _PROMPT_COUNTS or key == "cache_creation") and delta_prompt_total == 0 and start.get(key) is not None:
            continue  # a placeholder prompt split: keep message_start's
        if isinstance(value, Mapping):
            inner = dict(merged[key]) if isinstance(merged.get(key), Mapping) else {}
            inner.update({k: v for k, v in value.items() if v is not None})
            merged[key] = inner
        else:
            merged[key] = value
    return merged


def _as_dict(payload: Any) -> dict[str, Any]:
    if payload is not None and not isinstance(payload, Mapping) and hasattr(payload, "model_dump"):
        payload = payload.model_dump()
    return dict(payload) if isinstance(payload, Mapping) else {}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def anthropic_stream_usage(
    message_start_usage: Mapping[str, Any] | Any, message_delta_usage: Mapping[str, Any] | Any
) -> tuple[dict[str, Any], Usage]:
    """The raw usage to store and its reading for one stream: `merge_anthropic_stream` then
    `from_anthropic`. When the delta's prompt counts replaced different ones from `message_start`
    (the documented web-search stream: input 2,679 at the start, 10,682 at the end), the start's
    usage is kept as received under "message_start", so the row shows both. A stream that reported
    no usage at all gives every bucket unknown, flagged `usage_missing`, rather than losing the call."""
    merged = merge_anthropic_stream(message_start_usage, message_delta_usage)
    if not merged:
        return merged, Usage(flags=("usage_missing: Anthropic: the stream carried no usage in message_start or message_delta",))
    usage = from_anthropic(merged)
    start = _as_dict(message_start_usage)
    if any(start.get(key) != merged.get(key) for key in (*_PROMPT_COUNTS, "cache_creation") if key in start):
        merged = {**merged, "message_start": start}
    return merged, usage
