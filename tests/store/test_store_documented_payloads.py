"""Payload shapes from the providers' documentation, through the normalizers and the shipped prices:
the stored buckets and the cost, exact to a millionth of a cent."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from hitrate.store.cost import cost
from hitrate.store.normalize import (
    anthropic_stream_usage,
    from_anthropic,
    from_gemini_openai,
    from_openai_chat,
)
from hitrate.store.prices import PriceTable

AT = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)
TABLE = PriceTable.default()
CENT_FRACTION = 1e-8  # USD: a millionth of a cent


def buckets(usage) -> tuple:
    return (usage.fresh_input, usage.cache_write_5m, usage.cache_write_1h, usage.cache_read, usage.output)


def test_anthropic_web_search_stream_from_the_streaming_docs() -> None:
    # docs.anthropic.com "Streaming Messages", "Streaming request with web search tool use":
    # message_start says input 2,679; the final message_delta carries the cumulative counts.
    start = {"input_tokens": 2679, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 3}
    delta = {"input_tokens": 10682, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 510,
             "server_tool_use": {"web_search_requests": 1}}
    raw, usage = anthropic_stream_usage(start, delta)
    assert raw["input_tokens"] == 10682 and raw["server_tool_use"] == {"web_search_requests": 1}
    assert raw["message_start"] == start  # both events' counts stay on the row
    assert buckets(usage) == (10682, 0, 0, 0, 510) and usage.web_search_requests == 1 and not usage.flags
    priced = cost(usage, "claude-sonnet-4-6", AT, TABLE)
    # 10,682 x $3 + 510 x $15 per MTok + 1 search x $10 / 1,000
    assert priced.server_tools == pytest.approx(0.01, abs=CENT_FRACTION)
    assert priced.total == pytest.approx(0.032046 + 0.00765 + 0.01, abs=CENT_FRACTION)


def test_anthropic_stream_whose_write_total_outgrows_the_start_split() -> None:
    # The same stream through a proxy that split the writes in message_start only; MessageDeltaUsage
    # has no TTL split, so the 3,000 written beyond it are billed at the 5-minute rate, flagged.
    start = {"input_tokens": 2679, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0, "output_tokens": 3,
             "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 2000}}
    delta = {"input_tokens": 10682, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 0, "output_tokens": 510}
    _, usage = anthropic_stream_usage(start, delta)
    assert buckets(usage) == (10682, 3000, 2000, 0, 510)
    assert usage.flag_codes() == ["cache_write_split_short"] and "remaining 3000" in usage.flags[0]
    priced = cost(usage, "claude-opus-5", AT, TABLE)
    # $5 input, $6.25 5m write, $10 1h write, $25 output per MTok
    assert priced.total == pytest.approx(0.05341 + 0.01875 + 0.02 + 0.01275, abs=CENT_FRACTION)


def test_anthropic_basic_example_without_cache_fields_is_priced() -> None:
    # The Messages docs' basic response carries only input and output counts: no cache was used.
    usage = from_anthropic({"input_tokens": 2095, "output_tokens": 503})
    assert buckets(usage) == (2095, 0, 0, 0, 503) and usage.fully_classified
    assert cost(usage, "claude-opus-5", AT, TABLE).total == pytest.approx(0.010475 + 0.012575, abs=CENT_FRACTION)


def test_anthropic_data_residency_example_is_priced_at_the_us_multiplier() -> None:
    # platform.claude.com "Data residency": the response usage names where inference ran.
    usage = from_anthropic({"input_tokens": 25, "output_tokens": 150, "inference_geo": "us"})
    assert usage.inference_geo == "us"
    priced = cost(usage, "claude-opus-4-6", AT, TABLE)
    assert priced.multiplier == pytest.approx(1.1) and priced.modifiers == ["inference_geo=us x1.1"]
    assert priced.total == pytest.approx((25 * 5 + 150 * 25) / 1e6 * 1.1, abs=CENT_FRACTION)
    assert priced.total == pytest.approx(0.0042625, abs=CENT_FRACTION)
    # "global" is the default geography: plain rates.
    plain = cost(from_anthropic({"input_tokens": 25, "output_tokens": 150, "inference_geo": "global"}), "claude-opus-4-6", AT, TABLE)
    assert plain.total == pytest.approx(0.003875, abs=CENT_FRACTION) and plain.modifiers == []
    # A model released before inference_geo existed has no US price: unpriced, never guessed.
    old = cost(usage, "claude-opus-4-5", AT, TABLE)
    assert old.total is None and "inference_geo='us'" in (old.unpriced_reason or "")


def test_anthropic_fast_mode_stacks_with_the_us_multiplier_and_cache_rates() -> None:
    # Fast mode on Opus 5.5: $8 / $40 per MTok (2x $4 / $20), cache multipliers on top.
    usage = from_anthropic({"input_tokens": 1000, "cache_read_input_tokens": 10000, "output_tokens": 500, "speed": "fast"})
    fast = cost(usage, "claude-opus-5-5", AT, TABLE)
    assert fast.total == pytest.approx(0.008 + 10000 * 0.2 * 2 / 1e6 + 0.02, abs=CENT_FRACTION)
    both = cost(usage.model_copy(update={"inference_geo": "us"}), "claude-opus-5-5", AT, TABLE)
    assert both.multiplier == pytest.approx(2.2) and both.total == pytest.approx(fast.total * 1.1, abs=CENT_FRACTION)
    # Fast mode with no documented price (Sonnet has none): unpriced with the reason.
    assert cost(usage, "claude-sonnet-5-5", AT, TABLE).total is None


def test_anthropic_compaction_iterations_from_the_compaction_docs() -> None:
    # "Compaction at a token threshold": the top level holds the message turn only; the
    # compaction iteration (180,000 in / 3,500 out) is billed on top.
    raw = {"input_tokens": 23000, "output_tokens": 1000, "iterations": [
        {"type": "compaction", "input_tokens": 180000, "output_tokens": 3500},
        {"type": "message", "input_tokens": 23000, "output_tokens": 1000},
    ]}
    usage = from_anthropic(raw)
    assert buckets(usage) == (203000, 0, 0, 0, 4500) and not usage.flags
    assert cost(usage, "claude-opus-4-6", AT, TABLE).total == pytest.approx(1.015 + 0.1125, abs=CENT_FRACTION)


def test_gemini_openai_thinking_outside_completion_tokens() -> None:
    # Gemini 3 over the OpenAI-compatible endpoint: thinking only in total_tokens and reasoning_tokens.
    usage = from_gemini_openai({"prompt_tokens": 21, "completion_tokens": 0, "total_tokens": 81,
                                "completion_tokens_details": {"reasoning_tokens": 60}})
    assert (usage.fresh_input, usage.cache_read, usage.output, usage.reasoning) == (21, 0, 60, 60) and not usage.flags
    # gemini-3.5-flash: $1.50 in, $9.00 out per MTok
    assert cost(usage, "gemini-3.5-flash", AT, TABLE).total == pytest.approx(0.0000315 + 0.00054, abs=CENT_FRACTION)


def test_openai_55_reporting_cache_writes_is_billed_by_the_price_table() -> None:
    # The documented usage block (2,006 prompt / 1,920 cached / 300 completion) from a model <= 5.5
    # that also reports writes: GPT-5.5 writes are free, so the 86 are fresh input (flagged).
    usage = from_openai_chat({"prompt_tokens": 2006, "completion_tokens": 300,
                              "prompt_tokens_details": {"cached_tokens": 1920, "cache_write_tokens": 86}},
                             writes_billed=TABLE.writes_billed("gpt-5.5"))
    assert (usage.fresh_input, usage.cache_read, usage.cache_write_total, usage.output) == (86, 1920, 0, 300)
    assert usage.flag_codes() == ["unexpected_cache_write_tokens"]
    # gpt-5.5: $5 in, $0.50 read, $30 out per MTok
    assert cost(usage, "gpt-5.5", AT, TABLE).total == pytest.approx(0.00043 + 0.00096 + 0.009, abs=CENT_FRACTION)


def test_anthropic_batch_results_are_billed_at_half_price() -> None:
    # Batch API: 50% of standard prices, cache multipliers on top; the usage names the tier.
    usage = from_anthropic({"input_tokens": 21, "cache_creation_input_tokens": 188086, "cache_read_input_tokens": 0,
                            "output_tokens": 393, "service_tier": "batch"})
    assert usage.service_tier == "batch"
    # Request 1 of the prompt-caching guide at Opus 5 prices ($1.185467 standard), halved.
    assert cost(usage, "claude-opus-5", AT, TABLE).total == pytest.approx(1.1854675 / 2, abs=CENT_FRACTION)
