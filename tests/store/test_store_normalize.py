"""Raw provider usage payloads -> Usage buckets, with each API's containment rule and quirks."""

from __future__ import annotations

import anthropic.types as at
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.completion_usage import CompletionUsage
from openai.types.responses.response_usage import ResponseUsage

from hitrate.store.normalize import (
    from_anthropic,
    from_deepseek,
    from_gemini,
    from_gemini_openai,
    from_openai_chat,
    from_openai_compatible,
    from_openai_responses,
    merge_anthropic_stream,
)
from hitrate.store.usage import Usage

# Anthropic's documented usage for the Pride and Prejudice example (reference T7).
ANTHROPIC_WRITE = {"cache_creation_input_tokens": 188086, "cache_read_input_tokens": 0, "input_tokens": 21, "output_tokens": 393}
ANTHROPIC_READ = {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 188086, "input_tokens": 21, "output_tokens": 393}
# OpenAI's documented usage block (reference T8).
OPENAI_DOC = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920},
    "completion_tokens_details": {"reasoning_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
}


# ---- Anthropic ------------------------------------------------------------------------------


def test_anthropic_write_then_read_documented_example() -> None:
    first = from_anthropic(ANTHROPIC_WRITE)
    assert first.fresh_input == 21  # never 21 + 188,086: input_tokens excludes the cache buckets
    assert first.cache_write_5m == 188086
    assert (first.cache_write_1h, first.cache_write_30m, first.cache_write_12h) == (0, 0, 0)
    assert first.cache_read == 0
    assert first.output == 393
    assert first.prompt_tokens == 188107

    second = from_anthropic(ANTHROPIC_READ)
    assert (second.fresh_input, second.cache_write_total, second.cache_read) == (21, 0, 188086)
    assert second.prompt_tokens == 188107
    assert second.has_cache_hit is True


def test_anthropic_ttl_split_is_used() -> None:
    usage = from_anthropic(
        {
            "input_tokens": 50,
            "cache_creation_input_tokens": 90000,
            "cache_creation": {"ephemeral_5m_input_tokens": 30000, "ephemeral_1h_input_tokens": 60000},
            "cache_read_input_tokens": 0,
            "output_tokens": 10,
        }
    )
    assert (usage.cache_write_5m, usage.cache_write_1h) == (30000, 60000)
    assert usage.prompt_tokens == 90050


def test_anthropic_split_short_of_its_total_bills_the_rest_at_5m_flagged() -> None:
    usage = from_anthropic(
        {
            "input_tokens": 1,
            "cache_creation_input_tokens": 100,
            "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 60},
            "output_tokens": 1,
        }
    )
    assert (usage.cache_write_5m, usage.cache_write_1h) == (40, 60)
    assert usage.flag_codes() == ["cache_write_split_short"]


def test_anthropic_sdk_object_with_thinking_breakdown() -> None:
    sdk = at.Usage(
        input_tokens=12,
        output_tokens=900,
        cache_creation_input_tokens=2048,
        cache_read_input_tokens=4096,
        cache_creation=at.CacheCreation(ephemeral_5m_input_tokens=0, ephemeral_1h_input_tokens=2048),
        output_tokens_details={"thinking_tokens": 700},
    )
    usage = from_anthropic(sdk)
    assert (usage.fresh_input, usage.cache_write_5m, usage.cache_write_1h, usage.cache_read) == (12, 0, 2048, 4096)
    assert usage.output == 900  # thinking is inside output_tokens, not added to it
    assert usage.reasoning == 700


def test_anthropic_absent_cache_fields_are_zero_by_the_api_contract() -> None:
    # Anthropic's own basic examples omit both cache counts: a request without cache marks reads
    # and writes nothing (see hitrate.store.normalize_anthropic).
    usage = from_anthropic({"input_tokens": 500, "output_tokens": 20})
    assert (usage.fresh_input, usage.cache_read, usage.cache_write_5m, usage.cache_write_total) == (500, 0, 0, 0)
    assert usage.prompt_tokens == 500 and usage.reasoning is None and not usage.flags


def test_anthropic_compatible_server_without_cache_fields_can_stay_unknown() -> None:
    usage = from_anthropic({"input_tokens": 500, "output_tokens": 20}, absent_cache_means_zero=False)
    assert usage.fresh_input == 500
    assert usage.cache_read is None
    assert usage.cache_write_5m is None and usage.cache_write_total is None
    assert usage.prompt_tokens is None


def test_anthropic_stream_merge_takes_cumulative_output_from_delta() -> None:
    start = {**ANTHROPIC_WRITE, "output_tokens": 1}
    merged = merge_anthropic_stream(start, {"output_tokens": 393})
    assert from_anthropic(merged) == from_anthropic(ANTHROPIC_WRITE)


def test_anthropic_stream_merge_with_final_counts_and_placeholder_zeros() -> None:
    start = at.Usage(input_tokens=21, output_tokens=1, cache_creation_input_tokens=188086, cache_read_input_tokens=0)
    # Newer servers repeat the final prompt counts in message_delta; some proxies send 0 there.
    final = at.MessageDeltaUsage(input_tokens=21, output_tokens=393, cache_creation_input_tokens=188086, cache_read_input_tokens=0)
    placeholder = {"input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 393}
    for delta in (final, placeholder):
        usage = from_anthropic(merge_anthropic_stream(start, delta))
        assert (usage.fresh_input, usage.cache_write_5m, usage.cache_read, usage.output) == (21, 188086, 0, 393)


def test_anthropic_stream_merge_takes_the_final_split_from_the_delta() -> None:
    # Servers that learn the cache split only at the end send the whole prompt as input first.
    start = {"input_tokens": 5000, "output_tokens": 0}
    delta = {"input_tokens": 8, "cache_read_input_tokens": 4990, "cache_creation_input_tokens": 2,
             "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": None}, "output_tokens": 16}
    usage = from_anthropic(merge_anthropic_stream(start, delta))
    assert (usage.fresh_input, usage.cache_read, usage.cache_write_5m, usage.output) == (8, 4990, 2, 16)
    # Null fields in the delta keep the start's values (proxies that omit them).
    assert merge_anthropic_stream({"input_tokens": 7, "output_tokens": 1}, {"input_tokens": None, "output_tokens": 3}) == {
        "input_tokens": 7, "output_tokens": 3}


def test_anthropic_stream_merge_keeps_ttl_split_from_start() -> None:
    start = {
        "input_tokens": 5,
        "output_tokens": 1,
        "cache_creation_input_tokens": 70,
        "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 60},
        "cache_read_input_tokens": 0,
    }
    usage = from_anthropic(merge_anthropic_stream(start, {"output_tokens": 44, "cache_creation": None}))
    assert (usage.cache_write_5m, usage.cache_write_1h, usage.output) == (10, 60, 44)


@given(
    fresh=st.integers(0, 10**7),
    w5=st.integers(0, 10**7),
    w1h=st.integers(0, 10**7),
    read=st.integers(0, 10**7),
    out=st.integers(0, 10**6),
)
def test_anthropic_prompt_is_sum_of_the_three_fields(fresh: int, w5: int, w1h: int, read: int, out: int) -> None:
    usage = from_anthropic(
        {
            "input_tokens": fresh,
            "cache_creation_input_tokens": w5 + w1h,
            "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h},
            "cache_read_input_tokens": read,
            "output_tokens": out,
        }
    )
    assert usage.fresh_input == fresh
    assert usage.prompt_tokens == fresh + w5 + w1h + read


# ---- OpenAI ---------------------------------------------------------------------------------


def test_openai_chat_documented_example() -> None:
    usage = from_openai_chat(OPENAI_DOC, writes_billed=False)
    assert (usage.fresh_input, usage.cache_read, usage.output, usage.reasoning) == (86, 1920, 300, 0)
    assert usage.cache_write_total == 0
    assert usage.prompt_tokens == 2006


def test_openai_chat_sdk_object() -> None:
    assert from_openai_chat(CompletionUsage(**OPENAI_DOC), writes_billed=False).fresh_input == 86


def test_openai_56_writes_are_inside_prompt_tokens() -> None:
    payload = {
        "prompt_tokens": 10000,
        "completion_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": 6000, "cache_write_tokens": 3000},
        "completion_tokens_details": {"reasoning_tokens": 150},
    }
    usage = from_openai_chat(payload, writes_billed=True)
    assert (usage.fresh_input, usage.cache_write_30m, usage.cache_read) == (1000, 3000, 6000)
    assert usage.prompt_tokens == 10000  # not 13,000: the writes are a subset of prompt_tokens
    assert (usage.output, usage.reasoning) == (200, 150)
    asked_12h = from_openai_chat(payload, writes_billed=True, write_ttl="12h")
    assert (asked_12h.cache_write_30m, asked_12h.cache_write_12h) == (0, 3000)


def test_openai_56_without_write_count_leaves_split_unknown() -> None:
    usage = from_openai_chat({"prompt_tokens": 10000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}, writes_billed=True)
    assert usage.cache_write_30m is None and usage.fresh_input is None
    assert usage.prompt_tokens == 10000


def test_openai_writes_reported_for_a_free_write_model_are_billed_as_fresh_and_flagged() -> None:
    payload = {"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 90}}
    usage = from_openai_chat(payload, writes_billed=False)
    assert (usage.fresh_input, usage.cache_write_total) == (100, 0)
    assert usage.flag_codes() == ["unexpected_cache_write_tokens"]
    zero_writes = {**payload, "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}}
    assert from_openai_chat(zero_writes, writes_billed=False).fresh_input == 100
    assert not from_openai_chat(zero_writes, writes_billed=False).flags


def test_openai_cached_plus_written_beyond_prompt_caps_the_writes() -> None:
    usage = from_openai_chat(
        {"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 80, "cache_write_tokens": 30}},
        writes_billed=True,
    )
    assert (usage.fresh_input, usage.cache_read, usage.cache_write_30m, usage.prompt_tokens) == (0, 80, 20, 100)
    assert usage.flag_codes() == ["cache_write_exceeds_uncached"]


def test_openai_responses_with_retention_split_sdk_object() -> None:
    sdk = ResponseUsage(
        input_tokens=50000,
        input_tokens_details={
            "cached_tokens": 30000,
            "cache_write_tokens": 15000,
            "cache_write_tokens_details": {"ttl_30m_tokens": 5000, "ttl_12h_tokens": 10000},
        },
        output_tokens=800,
        output_tokens_details={"reasoning_tokens": 500},
        total_tokens=50800,
    )
    usage = from_openai_responses(sdk, writes_billed=True)
    assert (usage.fresh_input, usage.cache_write_30m, usage.cache_write_12h, usage.cache_read) == (5000, 5000, 10000, 30000)
    assert (usage.output, usage.reasoning) == (800, 500)


def test_openai_responses_split_that_disagrees_is_rejected() -> None:
    payload = {
        "input_tokens": 100,
        "output_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 50, "cache_write_tokens_details": {"ttl_30m_tokens": 10, "ttl_12h_tokens": 10}},
    }
    usage = from_openai_responses(payload, writes_billed=True)
    # The total is billed; what the split leaves over goes to the requested TTL (30m).
    assert (usage.cache_write_30m, usage.cache_write_12h, usage.fresh_input) == (40, 10, 50)
    assert usage.flag_codes() == ["cache_write_split_short"]


def test_openai_responses_split_naming_one_ttl_leaves_the_rest_to_the_other() -> None:
    def payload(written: int) -> dict:
        details = {"cached_tokens": 10, "cache_write_tokens": written, "cache_write_tokens_details": {"ttl_12h_tokens": 20}}
        return {"input_tokens": 100, "output_tokens": 1, "input_tokens_details": details}

    usage = from_openai_responses(payload(50), writes_billed=True)
    assert (usage.cache_write_30m, usage.cache_write_12h, usage.fresh_input) == (30, 20, 40)
    capped = from_openai_responses(payload(15), writes_billed=True)
    assert (capped.cache_write_30m, capped.cache_write_12h, capped.fresh_input) == (0, 15, 75)
    assert capped.flag_codes() == ["cache_write_split_exceeds_total"]


def test_openai_responses_up_to_55() -> None:
    usage = from_openai_responses(
        {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1920}, "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 120}},
        writes_billed=False,
    )
    assert (usage.fresh_input, usage.cache_read, usage.output, usage.reasoning) == (86, 1920, 300, 120)


@given(data=st.data())
def test_openai_56_buckets_always_sum_to_prompt(data: st.DataObject) -> None:
    prompt = data.draw(st.integers(0, 10**6))
    cached = data.draw(st.integers(0, prompt))
    written = data.draw(st.integers(0, prompt - cached))
    usage = from_openai_chat(
        {"prompt_tokens": prompt, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written}},
        writes_billed=True,
    )
    assert usage.prompt_parts_sum == prompt
    assert usage.cache_write_30m == written


# ---- DeepSeek -------------------------------------------------------------------------------


def test_deepseek_hit_and_miss() -> None:
    usage = from_deepseek(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 60,
            "prompt_cache_hit_tokens": 800,
            "prompt_cache_miss_tokens": 200,
            "completion_tokens_details": {"reasoning_tokens": 40},
        }
    )
    assert (usage.fresh_input, usage.cache_read, usage.cache_write_total, usage.output, usage.reasoning) == (200, 800, 0, 60, 40)


def test_deepseek_full_miss_and_inconsistent_sum() -> None:
    miss = from_deepseek({"prompt_tokens": 1000, "completion_tokens": 1, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 1000})
    assert (miss.fresh_input, miss.cache_read) == (1000, 0)
    odd = from_deepseek({"prompt_tokens": 1000, "completion_tokens": 1, "prompt_cache_hit_tokens": 900, "prompt_cache_miss_tokens": 200})
    # DeepSeek bills the hit/miss split: it is kept, and the disagreeing prompt count dropped.
    assert (odd.fresh_input, odd.cache_read, odd.prompt_total, odd.prompt_tokens) == (200, 900, None, 1100)
    assert odd.flag_codes() == ["prompt_split_mismatch"]


def test_deepseek_falls_back_to_openai_cached_field() -> None:
    usage = from_deepseek({"prompt_tokens": 640, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 512}})
    assert (usage.fresh_input, usage.cache_read) == (128, 512)


# ---- Gemini ---------------------------------------------------------------------------------


def test_gemini_cached_tokens_are_inside_prompt_count() -> None:
    usage = from_gemini(
        {
            "promptTokenCount": 10000,
            "cachedContentTokenCount": 8000,
            "candidatesTokenCount": 300,
            "thoughtsTokenCount": 200,
            "totalTokenCount": 10500,
        }
    )
    assert (usage.fresh_input, usage.cache_read, usage.cache_write_total) == (2000, 8000, 0)
    assert (usage.output, usage.reasoning) == (500, 200)  # thinking billed as output
    assert usage.prompt_tokens == 10000


def test_gemini_absent_cached_count_is_zero_and_snake_case_works() -> None:
    camel = from_gemini({"promptTokenCount": 1200, "candidatesTokenCount": 30, "totalTokenCount": 1230})
    assert (camel.fresh_input, camel.cache_read, camel.output, camel.reasoning) == (1200, 0, 30, 0)
    snake = from_gemini({"prompt_token_count": 1200, "cached_content_token_count": 1024, "candidates_token_count": 30, "tool_use_prompt_token_count": 50})
    assert (snake.fresh_input, snake.cache_read, snake.prompt_tokens) == (226, 1024, 1250)


def test_gemini_without_prompt_count_is_unknown() -> None:
    usage = from_gemini({"candidatesTokenCount": 5})
    assert usage.fresh_input is None and usage.cache_read is None and usage.prompt_tokens is None


def test_gemini_openai_endpoint_counts_thinking_as_output() -> None:
    # Google's OpenAI-compatible endpoint, first request of a session (openai/openai-python#2544):
    # no prompt_tokens_details, and total_tokens - prompt_tokens > completion_tokens (thinking).
    first = from_gemini_openai(
        {"completion_tokens": 744, "prompt_tokens": 1469, "total_tokens": 2496, "prompt_tokens_details": None, "completion_tokens_details": None}
    )
    assert (first.fresh_input, first.cache_read) == (1469, 0)
    assert first.output == 1027
    hit = from_gemini_openai({"completion_tokens": 10, "prompt_tokens": 1469, "total_tokens": 1479, "prompt_tokens_details": {"cached_tokens": 1024}})
    assert (hit.fresh_input, hit.cache_read, hit.output) == (445, 1024, 10)
    cautious = from_gemini_openai({"completion_tokens": 744, "prompt_tokens": 1469, "total_tokens": 2496}, absent_cached_means_zero=False)
    assert cautious.cache_read is None and cautious.prompt_tokens == 1469 and cautious.output == 1027


# ---- self-hosted OpenAI-compatible servers --------------------------------------------------


def test_vllm_without_cached_field_is_unknown() -> None:
    usage = from_openai_compatible({"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520})
    assert usage.cache_read is None and usage.fresh_input is None
    assert usage.prompt_total == 500 and usage.prompt_tokens == 500
    assert usage.has_cache_hit is None
    assert from_openai_compatible({"prompt_tokens": 500, "completion_tokens": 1, "prompt_tokens_details": None}).cache_read is None


def test_vllm_omits_zero_when_flag_is_on() -> None:
    # With --enable-prompt-tokens-details vLLM drops a cached count of 0 (truthiness check), so a
    # caller who knows the flag is on can say absence means zero.
    usage = from_openai_compatible({"prompt_tokens": 500, "completion_tokens": 20}, absent_cached_means_zero=True)
    assert (usage.fresh_input, usage.cache_read) == (500, 0)
    reported = from_openai_compatible({"prompt_tokens": 500, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 384}})
    assert (reported.fresh_input, reported.cache_read) == (116, 384)


def test_llamacpp_timings_and_write_field() -> None:
    from_timings = from_openai_compatible({"prompt_tokens": 700, "completion_tokens": 9}, timings={"prompt_n": 100, "cache_n": 600})
    assert (from_timings.fresh_input, from_timings.cache_read) == (100, 600)
    # The fork that reports cache_write_tokens = prompt - cached: not subtracted a second time.
    fork = from_openai_compatible(
        {"prompt_tokens": 1000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 900, "cache_write_tokens": 100}}
    )
    assert (fork.fresh_input, fork.cache_write_total) == (100, 0)


# ---- malformed input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"input_tokens": -1, "output_tokens": 1},
        {"input_tokens": "12", "output_tokens": 1},
        {"input_tokens": 1.5, "output_tokens": 1},
        {"input_tokens": True, "output_tokens": 1},
    ],
)
def test_bad_counts_are_unknown_and_flagged(payload: dict) -> None:
    usage = from_anthropic(payload)
    assert usage.fresh_input is None and usage.output == 1
    assert usage.flag_codes() == ["bad_count"]


def test_non_object_payload_is_unknown_and_flagged() -> None:
    for usage in (from_openai_chat([1, 2], writes_billed=False), from_deepseek(None)):
        assert usage.buckets() == dict.fromkeys(usage.buckets())
        assert usage.flag_codes() == ["usage_not_object"]


def test_usage_invariants() -> None:
    with pytest.raises(ValueError, match="reasoning"):
        Usage(output=10, reasoning=11)
    with pytest.raises(ValueError, match="prompt_total"):
        Usage(fresh_input=1, cache_write_5m=0, cache_write_30m=0, cache_write_1h=0, cache_write_12h=0, cache_read=5, prompt_total=7)
    # A normalizer never builds an inconsistent Usage: reasoning above output is read as thinking
    # counted outside the output (flagged).
    repaired = from_openai_chat({"prompt_tokens": 10, "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 6}}, writes_billed=False)
    assert (repaired.output, repaired.reasoning, repaired.flag_codes()) == (11, 6, ["reasoning_exceeds_output"])
