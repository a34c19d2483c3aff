"""The TTL countdown: warm / expiring / cold / unknown from provider rules and the anchor call."""

from datetime import datetime, timedelta, timezone

import pytest

from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.caching.openai_prefix import OPENAI_IN_MEMORY
from hitrate.projection.caching.ttl import ttl_seconds
from hitrate.store.usage import BUCKETS, Usage
from hitrate.tui.ttl import PrefixClock, cache_clock, cache_mechanism, format_clock, newest_write_ttl, ttl_rule


def anthropic_rule(ttl_class: str):
    return family_for(CacheRules(family="anthropic")).lifetime(ttl_class)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)


def usage(**counts: int) -> Usage:
    return Usage(**{**dict.fromkeys(BUCKETS, 0), **counts})


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("elapsed", "state", "left"),
    [(0, "warm", 300), (239, "warm", 61), (240, "expiring", 60), (299, "expiring", 1), (300, "cold", None), (5000, "cold", None)],
)
def test_anthropic_5m_window(elapsed: float, state: str, left: float | None) -> None:
    clock = cache_clock(at(elapsed), T0, anthropic_rule("5m"))
    assert clock.state == state
    assert clock.seconds_left == left


def test_no_anchor_or_rule_is_unknown_never_warm() -> None:
    assert cache_clock(T0, None, anthropic_rule("5m")).state == "unknown"
    none = cache_clock(T0, T0, None, no_rule_reason="LRU")
    assert none.state == "unknown" and none.render() == "unknown · LRU"


def test_clock_going_backwards_claims_nothing() -> None:
    assert cache_clock(at(-5), T0, anthropic_rule("5m")).state == "unknown"


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        cache_clock(datetime(2026, 5, 1), T0, anthropic_rule("5m"))


def test_openai_in_memory_is_expiring_between_five_and_ten_minutes() -> None:
    assert cache_clock(at(200), T0, OPENAI_IN_MEMORY).state == "warm"
    assert cache_clock(at(400), T0, OPENAI_IN_MEMORY).state == "expiring"
    assert cache_clock(at(400), T0, OPENAI_IN_MEMORY).render() == "expiring? idle 6m40s (5-10m idle)"
    assert cache_clock(at(601), T0, OPENAI_IN_MEMORY).state == "cold"


def test_openai_30m_minimum_turns_unknown_not_cold() -> None:
    rule = ttl_rule("openai_breakpoints", None)
    assert cache_clock(at(1700), T0, rule).state == "warm"
    past = cache_clock(at(1900), T0, rule)
    assert past.state == "unknown" and "minimum" in past.reason


def test_render_and_format() -> None:
    assert cache_clock(at(48), T0, anthropic_rule("5m")).render() == "warm 4:12 (5m)"
    assert cache_clock(at(423), T0, anthropic_rule("5m")).render() == "cold · idle 7m03s (5m)"
    assert format_clock(0.2) == "0:01"
    assert format_clock(3725) == "1:02:05"
    assert ttl_seconds("12h") == 43200
    with pytest.raises(ValueError):
        ttl_seconds("soon")


def test_newest_write_ttl_takes_the_shortest_class_written() -> None:
    assert newest_write_ttl(usage(cache_write_1h=60_000, cache_write_5m=30_000)) == "5m"
    assert newest_write_ttl(usage(cache_write_1h=60_000)) == "1h"
    assert newest_write_ttl(usage(cache_read=5)) is None


def test_mechanisms_from_price_table_and_provider() -> None:
    assert cache_mechanism("anthropic", "claude-sonnet-4-6") == "anthropic_breakpoints"
    assert cache_mechanism("openai", "gpt-5.4") == "openai_automatic_prefix"
    assert cache_mechanism("openai", "gpt-5.6") == "openai_breakpoints"
    assert cache_mechanism("local", "/models/qwen") == "lru"
    assert cache_mechanism("openai-compat", "qwen@http://127.0.0.1:8000/v1") == "lru"
    assert cache_mechanism("anthropic", "claude-not-yet-released") == "anthropic_breakpoints"
    assert cache_mechanism("openai", "gpt-unknown") is None


def test_prefix_clock_follows_calls_and_resets_on_switch() -> None:
    clock = PrefixClock("anthropic", "claude-sonnet-4-6")
    assert clock.clock(T0).state == "unknown"
    clock.observe(T0, usage(cache_write_1h=5000, fresh_input=10))
    assert clock.clock(at(1000)).render() == "warm 43:20 (1h)"
    # A call that only reads refreshes the 1h entry from its own start.
    clock.observe(at(2000), usage(cache_read=5000, fresh_input=10))
    assert clock.clock(at(3000)).seconds_left == 2600
    # A call that neither read nor wrote does not refresh anything.
    clock.observe(at(3100), usage(fresh_input=900))
    assert clock.anchor == at(2000)
    clock.switch("openai", "gpt-5.4")
    assert clock.anchor is None and clock.clock(at(3200)).state == "unknown"
    # Automatic prefix caches write on every call, even one that reports no cache tokens.
    clock.observe(at(3300), usage(fresh_input=2000))
    assert clock.clock(at(3310)).state == "warm"


def test_resumed_anthropic_read_without_write_assumes_shortest_ttl() -> None:
    clock = PrefixClock("anthropic", "claude-sonnet-4-6")
    clock.observe(T0, usage(cache_read=4000))
    assert clock.rule is not None and clock.rule.label == "5m"


def test_local_engine_has_no_clock() -> None:
    clock = PrefixClock("local", "/models/tiny")
    clock.observe(T0, usage(cache_read=10, fresh_input=4))
    shown = clock.clock(at(1))
    assert shown.state == "unknown" and "LRU" in shown.reason


def test_gpt_5_5_keeps_prefixes_up_to_a_day_and_is_never_warmed() -> None:
    # gpt-5.5 accepts only prompt_cache_retention=24h: its clock is not the 5-10 minute idle one.
    clock = PrefixClock("openai", "gpt-5.5")
    clock.observe(T0, usage(fresh_input=100, cache_read=2000))
    assert clock.rule is not None and clock.rule.label == "up to 24h"
    assert clock.clock(at(200)).state == "warm"
    assert clock.clock(at(3 * 3600)).state == "unknown"  # not "cold": it may well still be there
    other = PrefixClock("openai", "gpt-5.4")
    other.observe(T0, usage(fresh_input=100, cache_read=2000))
    assert other.clock(at(3 * 3600)).state == "cold"
