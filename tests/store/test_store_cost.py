"""Cost arithmetic against the reference's worked examples (T1-T12) and its double-count traps."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from hitrate.projection.caching.anthropic import bill_split
from hitrate.projection.caching.openai_prefix import cached_tokens
from hitrate.store.cost import aggregate, cost, miss_cost
from hitrate.store.normalize import from_anthropic, from_deepseek, from_gemini, from_openai_chat
from hitrate.store.prices import PriceTable
from hitrate.store.usage import Usage

TABLE = PriceTable.default()
WHEN = datetime(2026, 11, 18, 12, 0, tzinfo=timezone.utc)  # a Wednesday, off-peak for DeepSeek
K = 1000


def anthropic_bill_split(prompt_tokens: int, marks: list[tuple[int, str]], hit_tokens: int) -> Usage:
    split = bill_split(prompt_tokens, marks, hit_tokens)
    return anthropic(fresh=split.fresh, w5=split.write_5m, w1h=split.write_1h, read=split.read)


def openai_cached_tokens(shared: int, model) -> int:
    return cached_tokens(shared, minimum=model.min_cacheable_tokens or 0, granularity=model.hit_granularity_tokens)


def anthropic(fresh: int = 0, w5: int = 0, w1h: int = 0, read: int = 0, out: int = 0) -> Usage:
    return Usage(fresh_input=fresh, cache_write_5m=w5, cache_write_30m=0, cache_write_1h=w1h, cache_write_12h=0, cache_read=read, output=out)


def input_equivalent(usages: list[Usage], model: str, when: datetime = WHEN) -> float:
    """Total cost of the calls in tokens of the model's base input price."""
    total = 0.0
    for usage in usages:
        breakdown = cost(usage, model, when, TABLE)
        assert breakdown.total is not None, breakdown.unpriced_reason
        total += breakdown.total
    return total * 1_000_000 / TABLE.rates_for(model, when, 1).tier.input


def ten_turns(writes: int, *, ttl: str = "5m") -> list[Usage]:
    """100K static prefix + 1K fresh per turn; the first `writes` turns write it, the rest read it."""
    write = {"w5": 100 * K} if ttl == "5m" else {"w1h": 100 * K}
    return [anthropic(fresh=1 * K, **write) if turn < writes else anthropic(fresh=1 * K, read=100 * K) for turn in range(10)]


# ---- T1-T5: the 10-turn example -------------------------------------------------------------


def test_t1_no_caching_costs_1010k() -> None:
    assert input_equivalent([anthropic(fresh=101 * K)] * 10, "claude-opus-5") == pytest.approx(1_010_000, abs=1e-6)


def test_t2_all_hits_after_first_cost_225k() -> None:
    cached = input_equivalent(ten_turns(1), "claude-opus-5")
    assert cached == pytest.approx(225_000, abs=1e-6)
    assert round(1 - cached / 1_010_000, 3) == 0.777


def test_t3_every_turn_expires_costs_1260k() -> None:
    all_writes = input_equivalent(ten_turns(10), "claude-opus-5")
    assert all_writes == pytest.approx(1_260_000, abs=1e-6)
    assert round(100 * all_writes / 1_010_000, 1) == 124.8


def test_t4_cost_is_110k_plus_115k_per_writing_turn() -> None:
    costs = {w: input_equivalent(ten_turns(w), "claude-opus-5") for w in range(1, 11)}
    for w, value in costs.items():
        assert value == pytest.approx(110_000 + 115_000 * w, abs=1e-6)
    assert [round(costs[w] / K) for w in range(2, 10)] == [340, 455, 570, 685, 800, 915, 1030, 1145]
    # "Only 2 of 10 hit" means 8 writing turns: 1,030K (102% of uncached), not 655K.
    assert costs[8] == pytest.approx(1_030_000, abs=1e-6)
    assert round(100 * costs[8] / 1_010_000) == 102
    # No number of writing turns gives 655K: it falls between w = 4 (570K) and w = 5 (685K).
    assert costs[4] < 655_000 < costs[5]
    assert all(value != pytest.approx(655_000, abs=1) for value in costs.values())


def test_t5_the_same_turns_under_other_pricing() -> None:
    assert input_equivalent(ten_turns(1, ttl="1h"), "claude-opus-5") == pytest.approx(300_000, abs=1e-6)
    assert input_equivalent(ten_turns(1), "claude-opus-5-5") == pytest.approx(180_000, abs=1e-6)
    assert input_equivalent(ten_turns(1), "claude-fable-5-1") == pytest.approx(157_500, abs=1e-6)

    # OpenAI up to 5.5: the first turn's write is billed as plain input.
    openai_turns = [{"prompt_tokens": 101 * K, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0 if t == 0 else 100 * K}} for t in range(10)]
    assert input_equivalent([from_openai_chat(p, writes_billed=False) for p in openai_turns], "gpt-5.5") == pytest.approx(200_000, abs=1e-6)

    gemini_turns = [{"promptTokenCount": 101 * K, **({"cachedContentTokenCount": 100 * K} if t else {})} for t in range(10)]
    assert input_equivalent([from_gemini(p) for p in gemini_turns], "gemini-2.5-flash") == pytest.approx(200_000, abs=1e-6)

    deepseek_turns = [
        {"prompt_tokens": 101 * K, "completion_tokens": 0, "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": 101 * K - hit}
        for hit in [0] + [100 * K] * 9
    ]
    usages = [from_deepseek(p) for p in deepseek_turns]
    assert input_equivalent(usages, "deepseek-flash") == pytest.approx(128_000, abs=1e-6)
    peak = datetime(2026, 11, 18, 2, 0, tzinfo=timezone.utc)
    assert input_equivalent(usages, "deepseek-flash", peak) == pytest.approx(128_000, abs=1e-6)


# ---- T6: OpenAI 128-token steps -------------------------------------------------------------


def test_t6_openai_in_memory_hits_round_down_to_128() -> None:
    gpt41 = TABLE.lookup("gpt-4.1")
    assert openai_cached_tokens(100_000, gpt41) == 99_968
    assert openai_cached_tokens(1_023, gpt41) == 0  # below the 1024 minimum
    assert openai_cached_tokens(1_024, gpt41) == 1_024
    assert openai_cached_tokens(100_000, TABLE.lookup("gpt-6.1-sol")) == 100_000  # exact breakpoints


# ---- T7, T8: documented payloads with exact dollars ------------------------------------------


def test_t7_anthropic_documented_usage_in_dollars() -> None:
    first = cost(from_anthropic({"cache_creation_input_tokens": 188086, "cache_read_input_tokens": 0, "input_tokens": 21, "output_tokens": 393}), "claude-opus-5", WHEN, TABLE)
    second = cost(from_anthropic({"cache_creation_input_tokens": 0, "cache_read_input_tokens": 188086, "input_tokens": 21, "output_tokens": 393}), "claude-opus-5", WHEN, TABLE)
    # 188,086 x 6.25 + 21 x 5 + 393 x 25 = 1,185,467.5 per million: $1.185467(5)
    assert first.total == pytest.approx(1.1854675, abs=1e-12)
    assert round(first.total, 6) in (1.185467, 1.185468)
    assert first.cache_write_5m == pytest.approx(1.1755375, abs=1e-12)
    assert second.total == pytest.approx(0.103973, abs=1e-12)
    assert second.cache_read == pytest.approx(0.094043, abs=1e-12)


def test_t7_trap_cache_creation_is_not_fresh_input() -> None:
    right = cost(from_anthropic({"cache_creation_input_tokens": 188086, "cache_read_input_tokens": 0, "input_tokens": 21, "output_tokens": 393}), "claude-opus-5", WHEN, TABLE)
    double_counted = cost(anthropic(fresh=21 + 188086, w5=188086, out=393), "claude-opus-5", WHEN, TABLE)
    assert right.fresh_input == pytest.approx(21 * 5 / 1e6, abs=1e-15)
    assert double_counted.total - right.total == pytest.approx(188086 * 5 / 1e6)


def test_t8_openai_documented_usage_on_gpt41() -> None:
    payload = {"prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920}}
    breakdown = cost(from_openai_chat(payload, writes_billed=TABLE.writes_billed("gpt-4.1")), "gpt-4.1", WHEN, TABLE)
    assert breakdown.fresh_input == pytest.approx(86 * 2 / 1e6, abs=1e-15)
    assert breakdown.cache_read == pytest.approx(1920 * 0.5 / 1e6, abs=1e-15)
    assert breakdown.total == pytest.approx(0.003532, abs=1e-12)


def test_openai_56_writes_are_not_billed_twice() -> None:
    payload = {"prompt_tokens": 10000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 6000, "cache_write_tokens": 3000}}
    breakdown = cost(from_openai_chat(payload, writes_billed=TABLE.writes_billed("gpt-5.6")), "gpt-5.6", WHEN, TABLE)
    # 1,000 fresh x 4 + 3,000 written x 5 + 6,000 read x 0.40 + 200 out x 20 = 25,400 per million
    assert breakdown.total == pytest.approx(0.0254, abs=1e-12)
    naive = (10000 - 6000) * 4 + 3000 * 5 + 6000 * 0.4 + 200 * 20  # prompt - cached at input + writes again
    assert breakdown.total != pytest.approx(naive / 1e6)


# ---- T9: mixed TTL breakpoints ----------------------------------------------------------------


def test_t9_mixed_ttl_billing_positions() -> None:
    cold = anthropic_bill_split(90_000, [(60_000, "1h"), (90_000, "5m")], hit_tokens=0)
    assert (cold.cache_write_1h, cold.cache_write_5m, cold.cache_read, cold.fresh_input) == (60_000, 30_000, 0, 0)
    warm = anthropic_bill_split(95_000, [(60_000, "1h"), (95_000, "5m")], hit_tokens=90_000)
    assert (warm.cache_read, warm.cache_write_1h, warm.cache_write_5m, warm.fresh_input) == (90_000, 0, 5_000, 0)
    with_output = warm.model_copy(update={"output": 0})
    assert cost(cold.model_copy(update={"output": 0}), "claude-opus-5", WHEN, TABLE).total == pytest.approx(0.7875, abs=1e-12)
    assert cost(with_output, "claude-opus-5", WHEN, TABLE).total == pytest.approx(0.07625, abs=1e-12)
    # A hit below the last 1h breakpoint: read A, 1h write up to B, 5m write up to C.
    partial = anthropic_bill_split(100_000, [(60_000, "1h"), (90_000, "5m")], hit_tokens=40_000)
    assert (partial.cache_read, partial.cache_write_1h, partial.cache_write_5m, partial.fresh_input) == (40_000, 20_000, 30_000, 10_000)
    with pytest.raises(ValueError, match="1h"):
        anthropic_bill_split(100_000, [(60_000, "5m"), (90_000, "1h")], hit_tokens=0)


# ---- T10: 50-turn Opus 5 ledger -----------------------------------------------------------------


def test_t10_fifty_turn_opus5() -> None:
    def dollars(usages: list[Usage]) -> float:
        return sum(cost(u, "claude-opus-5", WHEN, TABLE).total for u in usages)  # type: ignore[misc]

    uncached = dollars([anthropic(fresh=23 * K, out=700)] * 50)
    five_min = dollars([anthropic(fresh=3 * K, w5=20 * K, out=700)] + [anthropic(fresh=3 * K, read=20 * K, out=700)] * 49)
    one_hour = dollars([anthropic(fresh=3 * K, w1h=20 * K, out=700)] + [anthropic(fresh=3 * K, read=20 * K, out=700)] * 49)
    assert uncached == pytest.approx(6.6250, abs=1e-9)
    assert five_min == pytest.approx(2.2400, abs=1e-9)
    assert one_hour == pytest.approx(2.3150, abs=1e-9)
    assert round(100 * (five_min / uncached - 1), 2) == -66.19


# ---- T11, T12 -----------------------------------------------------------------------------------


def test_t11_deepseek_prefix_units_costs() -> None:
    a, tail = 1000, 200
    requests = [(0, a + tail), (0, a + tail), (a, tail)]  # A+B, A+C (miss), A+D (hits A)
    usages = [
        from_deepseek({"prompt_tokens": hit + miss, "completion_tokens": 10, "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": miss})
        for hit, miss in requests
    ]
    costs = [cost(u, "deepseek-flash", WHEN, TABLE).total for u in usages]
    assert costs[0] == pytest.approx((1200 * 0.15 + 10 * 0.60) / 1e6, abs=1e-15)
    assert costs[2] == pytest.approx((1000 * 0.003 + 200 * 0.15 + 10 * 0.60) / 1e6, abs=1e-15)
    totals = aggregate(zip(usages, costs, strict=True))
    assert totals.hit_ratio == pytest.approx(1000 / 3600)
    assert totals.calls_with_hit_share == pytest.approx(1 / 3)


def test_t12_haiku55_whole_request_moves_to_the_higher_tier() -> None:
    big = anthropic(fresh=20 * K, w5=10 * K, read=90 * K, out=1000)  # prompt 120K
    breakdown = cost(big, "claude-haiku-5-5", WHEN, TABLE)
    assert breakdown.tier == ">100K"
    assert breakdown.total == pytest.approx((20_000 * 0.5 + 10_000 * 0.625 + 90_000 * 0.05 + 1000 * 2.5) / 1e6, abs=1e-15)
    assert breakdown.output == pytest.approx(1000 * 2.5 / 1e6)  # output at the higher rate too
    at_threshold = cost(anthropic(fresh=10 * K, w5=0, read=90 * K, out=1000), "claude-haiku-5-5", WHEN, TABLE)
    assert at_threshold.tier == "base"
    assert at_threshold.total == pytest.approx((10_000 * 0.1 + 90_000 * 0.01 + 1000 * 0.5) / 1e6, abs=1e-15)


# ---- unknowns and aggregates -------------------------------------------------------------------


def test_reasoning_is_not_billed_on_top_of_output() -> None:
    with_thinking = cost(anthropic(fresh=1, out=1000).model_copy(update={"reasoning": 800}), "claude-opus-5", WHEN, TABLE)
    assert with_thinking.output == pytest.approx(1000 * 25 / 1e6)


def test_unknown_model_is_unpriced_not_guessed() -> None:
    breakdown = cost(anthropic(fresh=100), "my-local-model", WHEN, TABLE)
    assert breakdown.total is None and breakdown.fresh_input is None and not breakdown.priced
    assert "my-local-model" in (breakdown.unpriced_reason or "")


def test_unknown_bucket_makes_total_unknown() -> None:
    vllm_like = Usage(cache_write_5m=0, cache_write_30m=0, cache_write_1h=0, cache_write_12h=0, output=5, prompt_total=1000)
    breakdown = cost(vllm_like, "gpt-4.1", WHEN, TABLE)
    assert breakdown.output == pytest.approx(5 * 8 / 1e6)
    assert breakdown.fresh_input is None and breakdown.total is None
    assert "fresh_input tokens unknown" in (breakdown.unpriced_reason or "")


def test_writes_on_a_model_without_write_price_are_flagged() -> None:
    breakdown = cost(anthropic(w5=100), "gpt-4.1", WHEN, TABLE)
    assert breakdown.cache_write_5m is None and breakdown.total is None


def test_hit_ratio_is_sum_based_not_a_mean_of_ratios() -> None:
    small_hit = anthropic(fresh=10, read=90)
    big_miss = anthropic(fresh=10_000)
    unknown = Usage(output=3, prompt_total=500)
    totals = aggregate([(small_hit, 0.01), (big_miss, 0.05), (unknown, None)])
    assert totals.hit_ratio == pytest.approx(90 / 10_100)  # a mean of ratios would say 0.45
    assert totals.calls_with_hit_share == pytest.approx(0.5)  # of the 2 calls with a known read count
    assert totals.calls == 3 and totals.unpriced_calls == 1
    assert totals.cost_usd == pytest.approx(0.06)
    assert totals.unknown["cache_read"] == 1 and totals.unknown["fresh_input"] == 1
    assert (totals.fresh_input, totals.cache_read, totals.output) == (10_010, 90, 3)


def test_empty_aggregate() -> None:
    totals = aggregate([])
    assert totals.calls == 0 and totals.hit_ratio is None and totals.calls_with_hit_share is None and totals.cost_usd is None


def test_cost_needs_timezone() -> None:
    with pytest.raises(ValueError, match="timezone"):
        cost(anthropic(fresh=1), "claude-opus-5", datetime(2026, 11, 18, 12), TABLE)
    assert cost(anthropic(fresh=1), "claude-opus-5", WHEN - timedelta(days=400), TABLE).total is not None


def test_miss_cost_is_the_missed_tokens_at_what_was_paid_instead_of_the_read_rate() -> None:
    rates = TABLE.rates_for("claude-opus-5", WHEN, 1).tier
    assert rates.write_1h is not None and rates.write_5m is not None and rates.read is not None
    # The largest write class sets the price the missed tokens were paid at.
    mixed = anthropic(fresh=10, w5=100, w1h=4 * K)
    breakdown = cost(mixed, "claude-opus-5", WHEN, TABLE)
    assert miss_cost(3 * K, mixed, breakdown) == pytest.approx(3 * K * (rates.write_1h - rates.read) / 1e6)
    # Nothing written: the missed tokens were paid as fresh input.
    fresh = anthropic(fresh=5 * K)
    assert miss_cost(5 * K, fresh, cost(fresh, "claude-opus-5", WHEN, TABLE)) == pytest.approx(5 * K * (rates.input - rates.read) / 1e6)
    assert miss_cost(0, fresh, cost(fresh, "claude-opus-5", WHEN, TABLE)) == 0.0
    # Unknown count, or no rates (an unpriced model): unknown, never 0.
    assert miss_cost(None, fresh, cost(fresh, "claude-opus-5", WHEN, TABLE)) is None
    unpriced = cost(fresh, "no-such-model", WHEN, TABLE)
    assert unpriced.rates is None and miss_cost(0, fresh, unpriced) is None and miss_cost(100, fresh, unpriced) is None
