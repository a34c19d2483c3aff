"""The reference's test vectors (provider-semantics §11) through the what-if simulators."""

from __future__ import annotations

import pytest

from hitrate.evals.whatif.anthropic import AnthropicSimConfig, simulate_anthropic
from hitrate.evals.whatif.deepseek import simulate_deepseek
from hitrate.evals.whatif.openai import PrefixSimConfig, simulate_prefix_cache
from hitrate.store.usage import Usage

from whatif_builders import input_equivalent, request

K = 1000


def t2_requests(gaps_s: list[float], *, ttl: str = "5m", model: str = "claude-sonnet-4-6") -> list:
    """100K system (marked) + a different 1K user message per turn, not accumulating."""
    at = 0.0
    out = []
    for turn in range(len(gaps_s) + 1):
        out.append(request(at, [("system", "sys", 100 * K, ttl), ("history", f"user-{turn}", 1 * K)], model=model))
        if turn < len(gaps_s):
            at += gaps_s[turn]
    return out


def anthropic(requests, model: str = "claude-sonnet-4-6", **config):
    cfg = AnthropicSimConfig(min_cacheable_tokens=1024, marks="recorded", **config)
    return [p.usage for p in simulate_anthropic(requests, cfg)]


def test_t1_uncached_baseline_is_1010k():
    usages = [Usage(fresh_input=101 * K, cache_write_5m=0, cache_write_30m=0, cache_write_1h=0, cache_write_12h=0, cache_read=0, output=0)] * 10
    assert input_equivalent(usages, "claude-sonnet-4-6") == pytest.approx(1_010 * K)


def test_t2_anthropic_5m_all_turns_hit_after_the_first_is_225k():
    usages = anthropic(t2_requests([60.0] * 9))
    assert usages[0].cache_write_5m == 100 * K and usages[0].fresh_input == 1 * K
    assert all(u.cache_read == 100 * K and u.fresh_input == 1 * K for u in usages[1:])
    assert input_equivalent(usages, "claude-sonnet-4-6") == pytest.approx(225 * K)


def test_t3_every_turn_expired_is_1260k():
    usages = anthropic(t2_requests([301.0] * 9))
    assert all(u.cache_read == 0 and u.cache_write_5m == 100 * K for u in usages)
    assert input_equivalent(usages, "claude-sonnet-4-6") == pytest.approx(1_260 * K)


@pytest.mark.parametrize("w", range(2, 10))
def test_t4_cost_is_110k_plus_115k_per_writing_turn(w):
    # The first turn always writes; w - 1 of the other nine come after the entry expired.
    gaps = [400.0] * (w - 1) + [30.0] * (10 - w)
    usages = anthropic(t2_requests(gaps))
    assert sum(u.cache_write_5m > 0 for u in usages) == w
    assert input_equivalent(usages, "claude-sonnet-4-6") == pytest.approx(110 * K + 115 * K * w)


def test_t4_only_two_of_ten_hit_is_1030k_not_655k():
    usages = anthropic(t2_requests([400.0] * 7 + [30.0] * 2))
    total = input_equivalent(usages, "claude-sonnet-4-6")
    assert total == pytest.approx(1_030 * K)
    assert total != pytest.approx(655 * K)


def test_t5_anthropic_1h_write_is_300k():
    usages = anthropic(t2_requests([60.0] * 9, ttl="1h"))
    assert usages[0].cache_write_1h == 100 * K and usages[0].cache_write_5m == 0
    assert input_equivalent(usages, "claude-sonnet-4-6") == pytest.approx(300 * K)


def test_t5_1h_entry_outlives_gaps_that_kill_a_5m_one():
    five = anthropic(t2_requests([1000.0] * 9, ttl="5m"))
    hour = anthropic(t2_requests([1000.0] * 9, ttl="1h"))
    assert sum(u.cache_read > 0 for u in five) == 0
    assert sum(u.cache_read > 0 for u in hour) == 9


@pytest.mark.parametrize(("model", "expected"), [("claude-opus-5-5", 180 * K), ("claude-fable-5-1", 157.5 * K)])
def test_t5_cheaper_reads(model, expected):
    usages = anthropic(t2_requests([60.0] * 9, model=model), model=model)
    assert input_equivalent(usages, model) == pytest.approx(expected)


def test_t5_openai_automatic_prefix_free_writes_is_200k():
    reqs = t2_requests([60.0] * 9, model="gpt-5.5")
    # gpt-5.5 has no 128-token rounding (its retention is extended-only).
    usages = [p.usage for p in simulate_prefix_cache(reqs, PrefixSimConfig(min_tokens=1024, granularity=1))]
    assert usages[0].cache_read == 0 and usages[0].fresh_input == 101 * K
    assert all(u.cache_read == 100 * K for u in usages[1:])
    assert sum(u.cache_write_total for u in usages) == 0
    assert input_equivalent(usages, "gpt-5.5") == pytest.approx(200 * K)


def test_t5_deepseek_flash_pricing_of_the_t2_pattern_is_128k():
    # The T2 cache pattern (everything after the first turn reads the system prompt) at DeepSeek
    # flash prices: free writes, reads at 2% of input.
    pattern = anthropic(t2_requests([60.0] * 9))
    as_deepseek = [u.model_copy(update={"fresh_input": u.fresh_input + u.cache_write_5m, "cache_write_5m": 0}) for u in pattern]
    assert input_equivalent(as_deepseek, "deepseek-flash") == pytest.approx(128 * K)


def test_t5_deepseek_prefix_units_miss_the_second_turn_of_the_t2_pattern():
    # Under prefix units the second turn (A + C after A + B) reads nothing; it saves A as the
    # common prefix, which every later turn reads: 101 + 101 + 8 x (2 + 1) = 226K, not 128K.
    usages = [p.usage for p in simulate_deepseek(t2_requests([60.0] * 9, model="deepseek-flash"))]
    assert [u.cache_read for u in usages[:3]] == [0, 0, 100 * K]
    assert input_equivalent(usages, "deepseek-flash") == pytest.approx(226 * K)


def test_t6_openai_shared_prefix_of_100000_reads_99968():
    reqs = t2_requests([10.0], model="gpt-4.1")
    usages = [p.usage for p in simulate_prefix_cache(reqs, PrefixSimConfig(min_tokens=1024, granularity=128))]
    assert usages[1].cache_read == 99_968
    assert usages[1].fresh_input == 101 * K - 99_968


def test_t9_mixed_ttl_a_b_c_billing():
    first = request(0, [("system", "sys", 60 * K, "1h"), ("history", "u1", 30 * K, "5m")], model="claude-opus-5")
    second = request(
        120,
        [("system", "sys", 60 * K, "1h"), ("history", "u1", 30 * K, "5m"), ("history", "u2", 5 * K, "5m")],
        model="claude-opus-5",
    )
    one, two = anthropic([first, second])
    assert (one.cache_write_1h, one.cache_write_5m, one.cache_read, one.fresh_input) == (60 * K, 30 * K, 0, 0)
    assert (two.cache_read, two.cache_write_5m, two.cache_write_1h, two.fresh_input) == (90 * K, 5 * K, 0, 0)


def test_t9_after_the_5m_entry_expires_the_1h_entry_still_reads():
    first = request(0, [("system", "sys", 60 * K, "1h"), ("history", "u1", 30 * K, "5m")], model="claude-opus-5")
    later = request(
        900,
        [("system", "sys", 60 * K, "1h"), ("history", "u1", 30 * K, "5m"), ("history", "u2", 5 * K, "5m")],
        model="claude-opus-5",
    )
    _, two = anthropic([first, later])
    assert (two.cache_read, two.cache_write_1h, two.cache_write_5m) == (60 * K, 0, 35 * K)


def test_t11_deepseek_a_b_then_a_c_then_a_d():
    a = ("system", "A", 10 * K)
    reqs = [
        request(0, [a, ("history", "B", 2 * K)], model="deepseek-flash", session="x"),
        request(60, [a, ("history", "C", 2 * K)], model="deepseek-flash", session="y"),
        request(120, [a, ("history", "D", 2 * K)], model="deepseek-flash", session="z"),
    ]
    hits = [p.usage.cache_read for p in simulate_deepseek(reqs)]
    assert hits == [0, 0, 10 * K]


def test_t11_a_b_then_a_b_c_reads_a_b():
    a, b = ("system", "A", 10 * K), {"kind": "history", "name": "B", "tokens": 2 * K, "role": "user"}
    c = {"kind": "history", "name": "C", "tokens": 1 * K, "role": "user"}
    reqs = [request(0, [a, b], model="deepseek-flash"), request(60, [a, b, c], model="deepseek-flash")]
    assert [p.usage.cache_read for p in simulate_deepseek(reqs)] == [0, 12 * K]


def test_deepseek_reply_is_saved_as_a_unit_the_next_turn_reads():
    a, b = ("system", "A", 10 * K), {"kind": "history", "name": "B", "tokens": 2 * K, "role": "user"}
    reply = {"kind": "history", "name": "reply", "tokens": 500, "role": "assistant"}
    nxt = {"kind": "history", "name": "next", "tokens": 300, "role": "user"}
    reqs = [
        request(0, [a, b], model="deepseek-flash", latency=5.0),
        request(30, [a, b, reply, nxt], model="deepseek-flash"),
    ]
    assert [p.usage.cache_read for p in simulate_deepseek(reqs)] == [0, 12_500]


def test_deepseek_reply_unit_exists_only_after_the_reply_ended():
    a, b = ("system", "A", 10 * K), {"kind": "history", "name": "B", "tokens": 2 * K, "role": "user"}
    reply = {"kind": "history", "name": "reply", "tokens": 500, "role": "assistant"}
    reqs = [
        request(0, [a, b], model="deepseek-flash", latency=50.0),
        request(30, [a, b, reply], model="deepseek-flash"),
    ]
    # The reply ends at 50 s; a request at 30 s can read only the input unit A + B.
    assert [p.usage.cache_read for p in simulate_deepseek(reqs)] == [0, 12 * K]
