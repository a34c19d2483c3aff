"""The keep-alive decision: when to warm a cached prefix, what the warm-up costs, what it is expected
to save, and every reason to skip it. Pure: prompts from the real projection, prices from the shipped
table, times given."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hitrate.harness.keepalive import (
    KeepAliveConfig,
    WarmContext,
    cache_entries,
    decide,
    return_probability,
)
from hitrate.harness.session_inputs import session_inputs
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage
from hitrate.store.prices import PriceTable

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)
PRICES = PriceTable.default()
# A fixed return probability, so the numbers below do not depend on the gap model.
FIXED = KeepAliveConfig(return_probability=0.5, learn_from_gaps=False)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def projected(tmp_path: Path, rules: CacheRules, model: str):
    inputs = session_inputs(tmp_path)
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="Why does test_add fail? " * 40),)))
    return Projector(rules, session_id="s-keepalive").project(
        model=model, tools=inputs.tool_specs, system=inputs.system, transcript=transcript, docs=inputs.docs, rules=rules
    )


def context(tmp_path: Path, *, family: str = "anthropic", model: str = "claude-sonnet-4-6", provider: str = "anthropic",
            prompt_tokens: int = 200_000, head_ttl: str = "5m", message_ttl: str = "5m", **fields) -> WarmContext:
    if family == "anthropic":
        rules = CacheRules(family="anthropic", min_cacheable_tokens=0, head_ttl=head_ttl, message_ttl=message_ttl)
    else:
        rules = CacheRules(family=family)
    prompt = projected(tmp_path, rules, model)
    base = dict(provider=provider, model=model, rules=rules, prompt=prompt, prompt_tokens=prompt_tokens, refreshed_at=T0,
                sent_at=T0, warm_output_tokens=0)
    return WarmContext(**{**base, **fields})


def test_warms_when_the_expected_saving_exceeds_the_cost(tmp_path):
    ctx = context(tmp_path)
    early = decide(ctx, at(100), FIXED, PRICES)
    assert early.action == "wait"
    # 5m counted from the request's start: warm at 90% of the TTL, gone at 300 s.
    assert early.warm_at == at(270) and early.expires_at == at(300) and early.ttl_label == "5m"
    assert early.render(at(100)) == "next warm in 2:50 (saves ~$0.28)"
    due = decide(ctx, at(271), FIXED, PRICES)
    assert due.action == "warm"
    # claude-sonnet-4-6: input $3, 5m write $3.75, read $0.30 per 1M. The warm-up reads all 200k
    # tokens; the next request would otherwise write them again.
    assert due.warm_cost_usd == pytest.approx(200_000 * 0.30 / 1e6)
    assert due.saving_if_back_usd == pytest.approx(200_000 * (3.75 - 0.30) / 1e6)
    assert due.net_usd == pytest.approx(0.5 * 0.69 - 0.06)
    assert due.tokens_at_risk == 200_000


def test_skips_when_the_saving_does_not_cover_the_warm_up(tmp_path):
    decision = decide(context(tmp_path, prompt_tokens=8_000), at(280), KeepAliveConfig(learn_from_gaps=False), PRICES)
    assert decision.action == "skip" and decision.reason.startswith("saves too little")
    # 15% × $0.0276 − $0.0024 is positive but under the $0.01 margin.
    assert 0 < decision.net_usd < 0.01
    assert decision.render(at(280)).startswith("off: saves too little: 15% × $0.03 − $0.0024")


@pytest.mark.parametrize(
    ("family", "provider", "model", "words"),
    [
        ("deepseek", "deepseek", "deepseek-flash", "hours to days"),
        ("local", "local", "tiny", "memory pressure"),
        ("openai_compat", "openai-compat", "qwen", "memory pressure"),
        ("gemini", "gemini", "gemini-2.5-flash", "no lifetime"),
    ],
)
def test_providers_without_a_ttl_are_never_warmed(tmp_path, family, provider, model, words):
    ctx = context(tmp_path, family=family, provider=provider, model=model, prompt_tokens=1_000_000)
    for seconds in (100, 280, 3300):
        decision = decide(ctx, at(seconds), FIXED, PRICES)
        assert decision.action == "skip" and words in decision.reason


def test_the_idle_cap_and_the_per_idle_cap_stop_warming(tmp_path):
    # Warmed five times already; the sixth would fall 32 minutes after the last request.
    ctx = context(tmp_path, refreshed_at=at(1650), sent_at=T0, warmups_since=5, warmups_total=5)
    decision = decide(ctx, at(1650 + 280), FIXED, PRICES)
    assert decision.action == "skip" and "past the 30m idle cap" in decision.reason
    ctx = context(tmp_path, refreshed_at=at(600), sent_at=T0, warmups_since=2, warmups_total=2)
    assert decide(ctx, at(880), FIXED.model_copy(update={"max_warmups_per_idle": 2}), PRICES).reason.startswith("stopped after 2")
    assert "most allowed" in decide(ctx, at(880), FIXED.model_copy(update={"max_warmups_total": 2}), PRICES).reason


def test_a_1h_ttl_still_warms_under_a_30_minute_idle_cap(tmp_path):
    # A fixed 30-minute idle cap lies before a 1h entry's first refresh (54 minutes), so it could
    # never fire; the cap stretches to one TTL.
    ctx = context(tmp_path, head_ttl="1h", message_ttl="1h")
    decision = decide(ctx, at(3245), FIXED, PRICES)
    assert decision.action == "warm" and decision.warm_at == at(3240) and decision.ttl_label == "1h"
    # A 1h write costs 2x input, so a lost 1h prefix costs more than a lost 5m one.
    assert decision.saving_if_back_usd == pytest.approx(200_000 * (6.0 - 0.30) / 1e6)
    # The second refresh (idle 1h48m) is past both the cap and one TTL.
    later = context(tmp_path, head_ttl="1h", message_ttl="1h", refreshed_at=at(3240), warmups_since=1, warmups_total=1)
    assert "idle cap" in decide(later, at(6490), FIXED, PRICES).reason


def test_timing_counts_from_the_request_start_and_an_expired_entry_is_not_warmed(tmp_path):
    ctx = context(tmp_path)
    assert decide(ctx, at(299), FIXED, PRICES).action == "warm"
    gone = decide(ctx, at(301), FIXED, PRICES)
    assert gone.action == "skip" and "expired" in gone.reason and gone.expires_at == at(300)
    # A warm-up moved the anchor: the next one is due 270 s after it, idle still counted from the request.
    rewarmed = context(tmp_path, refreshed_at=at(280), warmups_since=1, warmups_total=1)
    assert decide(rewarmed, at(400), FIXED, PRICES).warm_at == at(550)


def test_mixed_ttls_warm_the_1h_head_after_the_5m_tail_expired(tmp_path):
    ctx = context(tmp_path, head_ttl="1h", message_ttl="5m", refreshed_at=T0)
    prompt = ctx.prompt
    entries = cache_entries(prompt, ctx.rules, 200_000, PRICES)
    assert [e.label for e in entries] == ["1h", "5m"]
    head, tail = entries[0].tokens, entries[1].tokens - entries[0].tokens
    # The 5m entry is gone at 301 s; the 1h head is the one to keep, due at 54 minutes.
    decision = decide(ctx, at(3245), FIXED, PRICES)
    assert decision.ttl_label == "1h" and decision.warm_at == at(3240)
    # The warm-up reads the head and writes the expired tail again at the 5m rate.
    assert decision.warm_cost_usd == pytest.approx((head * 0.30 + tail * 3.75) / 1e6)
    # Without it, the next request writes the head again (1h rate) and the tail (5m rate).
    assert decision.saving_if_back_usd == pytest.approx((head * 6.0 + tail * 3.75 - (head + tail) * 0.30) / 1e6)


def test_the_sessions_own_gaps_raise_or_lower_the_return_probability(tmp_path):
    small = dict(prompt_tokens=40_000)
    prior = decide(context(tmp_path, **small), at(280), KeepAliveConfig(), PRICES)
    assert prior.action == "skip" and prior.probability == pytest.approx(0.15)
    # This user keeps coming back 6 to 8 minutes after a request: just after a 5m entry expires.
    back_soon = (2.0, 5.0, 380.0, 410.0, 450.0, 470.0)
    learned = decide(context(tmp_path, gaps_s=back_soon, **small), at(280), KeepAliveConfig(), PRICES)
    assert learned.action == "warm" and learned.probability == pytest.approx((4 + 2 * 0.15) / (4 + 2))
    assert "4 of 4 gaps" in learned.probability_source
    # One who comes back within the 5m or after an hour: a warm-up would not have helped.
    p, _ = return_probability((100.0, 200.0, 3600.0, 4000.0), 270, 300, 570, KeepAliveConfig(), first_warm_s=270)
    assert p == pytest.approx(0.3 / 4)


def test_without_gaps_to_learn_from_the_prior_fades_with_the_absence(tmp_path):
    # First warm-up of the stretch: the configured 15%; each later one less likely to be needed.
    config = KeepAliveConfig()
    first, _ = return_probability((), 270, 300, 570, config, first_warm_s=270)
    second, _ = return_probability((), 540, 570, 840, config, first_warm_s=270)
    assert first == pytest.approx(0.15) and second == pytest.approx(0.15 * 570 / 840)
    # A 400k prefix pays at 15% (break-even 0.30 / 3.45 = 8.7%), but not by the third warm-up.
    ctx = context(tmp_path, prompt_tokens=400_000, refreshed_at=at(540), warmups_since=2, warmups_total=2)
    third = decide(ctx, at(700), config, PRICES)
    assert third.action == "skip" and third.probability == pytest.approx(0.15 * 570 / 1110)
    assert decide(context(tmp_path, prompt_tokens=400_000), at(100), config, PRICES).action == "wait"


def test_off_blocked_unpriced_and_nothing_cached(tmp_path):
    off = decide(context(tmp_path), at(100), FIXED.model_copy(update={"enabled": False}), PRICES)
    assert off.action == "off" and off.render(at(100)) == "off: turned off; a warm-up would save ~$0.28"
    blocked = decide(context(tmp_path, blocked="the last warm-up failed (overloaded)"), at(280), FIXED, PRICES)
    assert blocked.action == "skip" and "failed" in blocked.reason
    unpriced = decide(context(tmp_path, model="claude-not-released"), at(280), FIXED, PRICES)
    assert unpriced.action == "skip" and "no price" in unpriced.reason
    nothing = decide(context(tmp_path, cached_nothing=True), at(280), FIXED, PRICES)
    assert nothing.action == "skip" and "cached nothing" in nothing.reason
    assert decide(context(tmp_path, prompt=None), at(10), FIXED, PRICES).reason == "nothing cached yet"
    with pytest.raises(ValueError, match="timezone"):
        decide(context(tmp_path), datetime(2026, 5, 4, 10, 4), FIXED, PRICES)


def test_openai_in_memory_cache_writes_are_free_so_a_miss_costs_fresh_input(tmp_path):
    ctx = context(tmp_path, family="openai_implicit", provider="openai", model="gpt-5.4", prompt_tokens=150_050,
                  warm_output_tokens=1)
    decision = decide(ctx, at(275), FIXED, PRICES)
    assert decision.action == "warm" and decision.ttl_label == "5-10m idle"
    cached = 150_050 - 150_050 % 128  # hits come in whole 128-token steps
    assert decision.warm_cost_usd == pytest.approx((cached * 0.25 + (150_050 - cached) * 2.5 + 1 * 15.0) / 1e6)
    assert decision.saving_if_back_usd == pytest.approx(cached * (2.5 - 0.25) / 1e6)
