"""Hypothesis strategies for usage payloads in each provider's shape, with every kind of surprise a
server can send: fields missing, null, zero, negative, fractional, of the wrong type, and counts
that contradict each other. Shared by the store's property tests and the harness's call-path ones."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# A count as a server might send it: usually plausible, sometimes anything.
COUNT = st.one_of(
    st.integers(0, 300_000),
    st.integers(0, 300_000),
    st.just(0),
    st.none(),
    st.integers(-1_000, -1),
    st.floats(min_value=-10, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.booleans(),
)
JUNK = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=4), st.lists(st.integers(0, 9), max_size=3), st.booleans())


def block(counts: tuple[str, ...], **nested: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An object whose keys are each present or not; count fields get `COUNT` values."""
    optional: dict[str, st.SearchStrategy[Any]] = {key: COUNT for key in counts}
    optional.update({key: st.one_of(strategy, JUNK) for key, strategy in nested.items()})
    return st.fixed_dictionaries({}, optional=optional)


def _anthropic_counts(**nested: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return block(
        ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"),
        cache_creation=block(("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")),
        **nested,
    )


_ITERATION = _anthropic_counts(type=st.sampled_from(["compaction", "message", "advisor_message", "fallback_message"]))
ANTHROPIC = _anthropic_counts(
    server_tool_use=block(("web_search_requests", "web_fetch_requests")),
    output_tokens_details=block(("thinking_tokens",)),
    inference_geo=st.sampled_from(["us", "global", "eu"]),
    speed=st.sampled_from(["fast", "standard", "turbo"]),
    iterations=st.lists(st.one_of(_ITERATION, JUNK), max_size=3),
)
OPENAI_CHAT = block(
    ("prompt_tokens", "completion_tokens", "total_tokens"),
    prompt_tokens_details=block(("cached_tokens", "cache_write_tokens")),
    completion_tokens_details=block(("reasoning_tokens",)),
)
OPENAI_RESPONSES = block(
    ("input_tokens", "output_tokens", "total_tokens"),
    input_tokens_details=block(
        ("cached_tokens", "cache_write_tokens"), cache_write_tokens_details=block(("ttl_30m_tokens", "ttl_12h_tokens"))
    ),
    output_tokens_details=block(("reasoning_tokens",)),
)
DEEPSEEK = block(
    ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens", "prompt_cache_miss_tokens"),
    prompt_tokens_details=block(("cached_tokens",)),
    completion_tokens_details=block(("reasoning_tokens",)),
)
GEMINI = block(("promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
                "toolUsePromptTokenCount", "prompt_token_count", "cached_content_token_count"))


def payload(shape: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Mostly the provider's shape; now and then not an object at all."""
    return st.one_of(shape, shape, shape, JUNK)
