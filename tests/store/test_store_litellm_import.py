"""Import of LiteLLM's price map, tested on a verbatim excerpt of the real file."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from hitrate.store.litellm_import import LiteLLMFormatError, import_litellm, load_litellm_file
from hitrate.store.prices import PriceTable

EXCERPT = Path(__file__).parent / "data" / "litellm_prices_excerpt.json"
AS_OF = date(2026, 11, 29)
WHEN = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def imported() -> PriceTable:
    return load_litellm_file(EXCERPT, as_of=AS_OF, source="https://pypi.org/project/litellm/1.110.2/")


def test_per_token_prices_become_per_million(imported: PriceTable) -> None:
    opus = imported.lookup("claude-opus-5").current
    tier = opus.tiers[0]
    assert (tier.input, tier.output, tier.write_5m, tier.write_1h, tier.read) == (5, 25, 6.25, 10, 0.5)
    assert opus.as_of == AS_OF and opus.source.startswith("https://pypi.org")


def test_anthropic_long_context_tier_with_1h_writes(imported: PriceTable) -> None:
    tiers = imported.lookup("claude-haiku-5-5").current.tiers
    assert [t.above_prompt_tokens for t in tiers] == [0, 100_000]
    high = tiers[1]
    assert (high.input, high.output, high.write_5m, high.write_1h, high.read) == (0.5, 2.5, 0.625, 1.0, 0.05)


def test_openai_writes_billed_and_ttl_classes(imported: PriceTable) -> None:
    gpt56 = imported.lookup("gpt-5.6")
    assert gpt56.writes_billed and gpt56.write_ttls == ["30m", "12h"] and gpt56.cache_mechanism == "openai_breakpoints"
    base, high = gpt56.current.tiers
    assert (base.write_30m, base.write_12h, base.write_5m) == (5, 10, None)
    assert (high.above_prompt_tokens, high.input, high.output, high.write_30m, high.write_12h, high.read) == (272_000, 8, 30, 10, 20, 0.8)
    gpt55 = imported.lookup("gpt-5.5")
    assert not gpt55.writes_billed and gpt55.write_ttls == [] and gpt55.cache_mechanism == "openai_automatic_prefix"
    assert gpt55.current.tiers[0].write_30m is None


def test_gemini_and_deepseek(imported: PriceTable) -> None:
    pro = imported.lookup("gemini-2.5-pro")
    assert pro.min_cacheable_tokens == 2048 and pro.deprecation_date == date(2026, 12, 1)
    assert [(t.above_prompt_tokens, t.input, t.output, t.read) for t in pro.current.tiers] == [(0, 1.25, 10, 0.125), (200_000, 2.5, 15, 0.25)]
    flash = imported.lookup("deepseek-flash")
    assert not flash.writes_billed
    # off_peak_pricing: the schedule's rates are off-peak, LiteLLM's base rates the peak.
    off, peak = flash.current.tiers[0], flash.current.peak
    assert (off.input, off.output, off.read) == (0.15, 0.6, 0.003)
    assert peak is not None and (peak.tiers[0].input, peak.tiers[0].output, peak.tiers[0].read) == (0.3, 1.2, 0.006)
    # windows: weekdays off-peak 00-01, 04-06, 10-24; weekends all day -> peak 01-04 and 06-10 on weekdays.
    assert peak.windows_utc == [("01:00", "04:00"), ("06:00", "10:00")] and peak.weekdays_only


def test_dated_duplicates_fold_into_aliases_and_filters_apply(imported: PriceTable) -> None:
    haiku = imported.lookup("claude-haiku-4-5-20251001")
    assert haiku.model == "claude-haiku-4-5" and "claude-haiku-4-5-20251001" in haiku.aliases
    assert imported.lookup("gpt-5.5-2026-04-23").model == "gpt-5.5"
    # A dated snapshot priced differently stays its own entry, and its undated name is not bent to it.
    assert imported.lookup("gpt-4o-2024-05-13").current.tiers[0].input == 5
    assert imported.lookup("gpt-4o").current.tiers[0].input == 2.5
    names = {m.model for m in imported.models}
    assert "anthropic.claude-opus-5" not in names  # Bedrock copy skipped
    assert "text-embedding-3-small" not in names and "sample_spec" not in names
    assert sum(1 for m in imported.models if m.model == "deepseek-flash") == 1


def test_imported_table_prices_a_call(imported: PriceTable) -> None:
    from hitrate.store.cost import cost
    from hitrate.store.normalize import from_openai_chat

    usage = from_openai_chat({"prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920}}, writes_billed=False)
    assert cost(usage, "gpt-4.1", WHEN, imported).total == pytest.approx(0.003532, abs=1e-12)


def test_off_peak_prices_a_call_by_its_time(imported: PriceTable) -> None:
    from hitrate.store.cost import cost
    from hitrate.store.normalize import from_deepseek

    usage = from_deepseek({"prompt_tokens": 1000, "completion_tokens": 100, "prompt_cache_hit_tokens": 800, "prompt_cache_miss_tokens": 200})
    # 2026-11-20 is a Friday: 12:00 UTC is off-peak, 02:00 UTC peak; Saturday is off-peak all day.
    off = cost(usage, "deepseek-v4-pro", datetime(2026, 11, 20, 12, tzinfo=timezone.utc), imported)
    peak = cost(usage, "deepseek-v4-pro", datetime(2026, 11, 20, 2, tzinfo=timezone.utc), imported)
    weekend = cost(usage, "deepseek-v4-pro", datetime(2026, 11, 21, 2, tzinfo=timezone.utc), imported)
    assert (off.peak, peak.peak, weekend.peak) == (False, True, False)
    assert off.total == pytest.approx((200 * 0.66 + 800 * 0.022 + 100 * 1.98) / 1e6, abs=1e-12)
    assert peak.total == pytest.approx(2 * off.total, abs=1e-12) and weekend.total == off.total


def test_service_tiers_are_kept_and_price_by_the_reported_tier(imported: PriceTable) -> None:
    from hitrate.store.cost import cost
    from hitrate.store.normalize import from_anthropic, from_openai_responses

    gpt = imported.lookup("gpt-5.6").current.service_tiers
    assert sorted(gpt) == ["batch", "flex", "priority"]
    assert [(t.above_prompt_tokens, t.input, t.output, t.write_30m, t.write_12h, t.read) for t in gpt["priority"]] == [
        (0, 8, 40, 10, 20, 0.8), (272_000, 16, 60, 20, 40, 1.6)]
    usage = from_anthropic({"input_tokens": 1000, "output_tokens": 100, "service_tier": "batch"})
    assert cost(usage, "claude-opus-5-5", WHEN, imported).total == pytest.approx((1000 * 2 + 100 * 10) / 1e6, abs=1e-12)
    # The haiku entry has no 1h batch rate: a batch call that wrote 1h entries is unpriced, not guessed.
    one_hour = from_anthropic({"input_tokens": 10, "output_tokens": 1, "service_tier": "batch", "cache_creation_input_tokens": 50,
                               "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 50}})
    assert cost(one_hour, "claude-haiku-5-5", WHEN, imported).total is None
    # Anthropic priority tier prices are contractual: not listed, so unpriced with the reason.
    priority = cost(usage.model_copy(update={"service_tier": "priority"}), "claude-opus-5-5", WHEN, imported)
    assert priority.total is None and "service_tier='priority'" in (priority.unpriced_reason or "")
    # "standard" is the list prices.
    standard = cost(usage.model_copy(update={"service_tier": "standard"}), "claude-opus-5-5", WHEN, imported)
    assert standard.total == pytest.approx((1000 * 4 + 100 * 20) / 1e6, abs=1e-12)
    assert from_openai_responses({"input_tokens": 1, "output_tokens": 1}, writes_billed=True).service_tier is None


def test_anthropic_geo_speed_and_web_search_fee(imported: PriceTable) -> None:
    opus = imported.lookup("claude-opus-5-5").current
    assert opus.inference_geo["us"].multiplier == 1.1 and opus.speed["fast"].multiplier == 2
    assert opus.server_tools["web_search_requests"].usd_per_request == 0.01
    haiku = imported.lookup("claude-haiku-5-5").current
    assert "fast" not in haiku.speed and haiku.inference_geo["us"].multiplier == 1.1


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        # one flat range every day: peak is the rest of the day, weekends included
        ({"hours_utc": "16:30-00:30", "input_cost_per_token": 1e-6}, ([("00:30", "16:30")], False)),
        # off-peak all the time: no peak hours at all
        ({"hours_utc": "00:00-00:00", "input_cost_per_token": 1e-6}, ([], False)),
        # a peak that runs to midnight
        ({"windows": [{"hours_utc": "00:00-20:00", "weekdays": ["mon", "tue", "wed", "thu", "fri"]},
                      {"hours_utc": "00:00-00:00", "weekdays": ["Sat", "sunday"]}], "input_cost_per_token": 1e-6},
         ([("20:00", "24:00")], True)),
        # weekdays that differ cannot be expressed: base (peak) rates only
        ({"windows": [{"hours_utc": "00:00-01:00", "weekdays": [1]}, {"hours_utc": "00:00-02:00", "weekdays": [2, 3, 4, 5, 6, 7]}],
          "input_cost_per_token": 1e-6}, None),
        ({"windows": [{"hours_utc": "25:00-01:00"}], "input_cost_per_token": 1e-6}, None),
        ("16:00-19:00", None),
    ],
)
def test_off_peak_window_shapes(block, expected) -> None:
    entry = {"litellm_provider": "deepseek", "mode": "chat", "input_cost_per_token": 2e-6, "output_cost_per_token": 4e-6, "off_peak_pricing": block}
    model = import_litellm({"deepseek-x": entry}, as_of=AS_OF, source="x").models[0]
    schedule = model.schedules[0]
    if expected is None:
        assert schedule.peak is None and schedule.tiers[0].input == 2 and "base (peak) rates only" in model.notes
        return
    windows, weekdays_only = expected
    assert schedule.tiers[0].input == 1 and schedule.tiers[0].output == 4  # unset off-peak rates keep the base
    if not windows:
        assert schedule.peak is None
        return
    assert schedule.peak is not None and schedule.peak.windows_utc == windows and schedule.peak.weekdays_only == weekdays_only
    assert schedule.peak.tiers[0].input == 2


def test_shipped_snapshot_agrees_with_litellm(imported: PriceTable) -> None:
    """Every model in both sources has the same rates, off-peak and peak ones too, and the same
    geography / speed multipliers and web search fee where LiteLLM has them. Catches a typo in the
    hand-kept snapshot."""
    shipped = PriceTable.default()
    compared = 0
    for theirs in imported.models:
        ours = shipped.find(theirs.model)
        if ours is None:
            continue
        our_schedule = ours.current
        their_schedule = theirs.current
        fields = ("input", "output", "write_5m", "write_30m", "write_1h", "write_12h", "read")
        assert [getattr(our_schedule.tiers[0], f) for f in fields] == [getattr(their_schedule.tiers[0], f) for f in fields], theirs.model
        assert [t.above_prompt_tokens for t in our_schedule.tiers] == [t.above_prompt_tokens for t in their_schedule.tiers], theirs.model
        assert (our_schedule.peak is None) == (their_schedule.peak is None), theirs.model
        if our_schedule.peak and their_schedule.peak:
            assert our_schedule.peak.windows_utc == their_schedule.peak.windows_utc, theirs.model
            assert [getattr(our_schedule.peak.tiers[0], f) for f in fields] == [getattr(their_schedule.peak.tiers[0], f) for f in fields]
        for kind in ("inference_geo", "speed"):
            for value, modifier in getattr(their_schedule, kind).items():
                assert getattr(our_schedule, kind)[value].multiplier == modifier.multiplier, (theirs.model, kind)
        for tier_name, their_levels in their_schedule.service_tiers.items():
            if ours.provider != "anthropic":
                continue  # the shipped table keeps service tiers for Anthropic only
            our_levels = our_schedule.service_tiers[tier_name]
            assert [t.above_prompt_tokens for t in our_levels] == [t.above_prompt_tokens for t in their_levels], theirs.model
            for our_level, their_level in zip(our_levels, their_levels, strict=True):
                for f in fields:  # LiteLLM leaves some batch rates out; those it gives must agree
                    if getattr(their_level, f) is not None:
                        assert getattr(our_level, f) == getattr(their_level, f), (theirs.model, tier_name, f)
        for tool, fee in their_schedule.server_tools.items():
            assert our_schedule.server_tools[tool].usd_per_request == fee.usd_per_request, theirs.model
        assert ours.writes_billed == theirs.writes_billed, theirs.model
        compared += 1
    assert compared >= 15


def test_bad_files_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(LiteLLMFormatError):
        import_litellm([], as_of=AS_OF, source="x")  # type: ignore[arg-type]
    with pytest.raises(LiteLLMFormatError, match="no chat model"):
        import_litellm({"text-embedding-3-small": json.loads(EXCERPT.read_text())["text-embedding-3-small"]}, as_of=AS_OF, source="x")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(LiteLLMFormatError, match="not JSON"):
        load_litellm_file(broken, as_of=AS_OF)


def test_name_filter() -> None:
    data = json.loads(EXCERPT.read_text())
    snapshot = import_litellm(data, as_of=AS_OF, source="x", names=["gemini/gemini-3.5-flash", "o3"])
    assert sorted(m.model for m in snapshot.models) == ["gemini-3.5-flash", "o3"]
