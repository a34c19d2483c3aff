"""The shipped price snapshot: provenance, look-up by name, tiers, time of day, schedules."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import pytest

from hitrate.store.prices import (
    PriceError,
    PriceSnapshot,
    PriceTable,
    UnknownModelError,
    canonical_model_name,
)

UTC = timezone.utc
TABLE = PriceTable.default()


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_every_schedule_is_dated_and_sourced() -> None:
    providers = {m.provider for m in TABLE.models}
    assert {"anthropic", "openai", "deepseek", "gemini"} <= providers
    for entry in TABLE.models:
        for schedule in entry.schedules:
            assert schedule.source.startswith("https://"), entry.model
            assert date(2026, 1, 1) <= schedule.as_of <= TABLE.as_of, entry.model
            assert schedule.tiers[0].input > 0 and schedule.tiers[0].output > 0, entry.model


def test_reference_list_prices() -> None:
    # Section 9 of the provider reference, base tier.
    expected = {
        "claude-fable-5-1": (10, 50, 12.5, None, 20, 0.25),
        "claude-opus-5-5": (4, 20, 5, None, 8, 0.20),
        "claude-opus-5": (5, 25, 6.25, None, 10, 0.50),
        "claude-haiku-4-5": (1, 5, 1.25, None, 2, 0.10),
        "claude-sonnet-4-6": (3, 15, 3.75, None, 6, 0.30),
        "gpt-6.1-sol": (2, 10, None, 2.5, None, 0.10),
        "gpt-6-luna": (0.10, 0.50, None, 0.125, None, 0.01),
        "gpt-5.6": (4, 20, None, 5, None, 0.40),
        "gpt-5.5": (5, 30, None, None, None, 0.50),
        "gpt-4.1": (2, 8, None, None, None, 0.50),
        "o3": (2, 8, None, None, None, 0.50),
        "gemini-3.1-pro-preview": (2, 12, None, None, None, 0.20),
        "gemini-3.5-flash": (1.5, 9, None, None, None, 0.15),
        "gemini-2.5-pro": (1.25, 10, None, None, None, 0.125),
        "gemini-2.5-flash": (0.30, 2.50, None, None, None, 0.03),
    }
    for name, (inp, out, w5, w30, w1h, read) in expected.items():
        tier = TABLE.lookup(name).current.tiers[0]
        assert (tier.input, tier.output, tier.write_5m, tier.write_30m, tier.write_1h, tier.read) == (inp, out, w5, w30, w1h, read), name


def test_snapshot_id_is_a_content_hash() -> None:
    again = PriceTable.from_json(TABLE.to_json())
    assert again.id == TABLE.id and TABLE.id.startswith("ps-")
    data = json.loads(TABLE.to_json())
    data["models"][0]["schedules"][0]["tiers"][0]["input"] += 1
    assert PriceTable(PriceSnapshot.model_validate(data)).id != TABLE.id


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("anthropic/claude-opus-4.5", "claude-opus-4-5"),
        ("Claude-Opus-4-5@20251101", "claude-opus-4-5"),
        ("claude-opus-4-5-20991231", "claude-opus-4-5"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini/gemini-3.5-flash", "gemini-3.5-flash"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("openai/gpt-5.6-sol", "gpt-5.6"),
        ("deepseek-v4-flash", "deepseek-flash"),
        ("deepseek/deepseek-v4-pro", "deepseek-v4-pro"),
        ("deepseek-reasoner", "deepseek-chat"),
    ],
)
def test_lookup_resolves_aliases_prefixes_and_dates(name: str, entry: str) -> None:
    assert TABLE.lookup(name).model == entry


def test_lookup_never_guesses_by_prefix() -> None:
    assert TABLE.find("gpt-5.6-mini") is None
    assert TABLE.lookup("gpt-5.6-terra").model == "gpt-5.6-terra"
    with pytest.raises(UnknownModelError, match="gpt-5.6-mini") as err:
        TABLE.lookup("gpt-5.6-mini")
    assert "closest known" in str(err.value)


def test_canonical_names() -> None:
    assert canonical_model_name(" Anthropic/claude-sonnet-4.6-20260101 ") == "claude-sonnet-4-6"
    assert canonical_model_name("gpt-4.1") == "gpt-4.1"  # dots kept outside Claude names


def test_writes_billed_is_model_metadata() -> None:
    assert TABLE.writes_billed("gpt-5.6") and TABLE.writes_billed("gpt-6.1-sol") and TABLE.writes_billed("gpt-6-luna")
    assert not TABLE.writes_billed("gpt-5.5") and not TABLE.writes_billed("gpt-4.1") and not TABLE.writes_billed("o3")
    assert TABLE.writes_billed("claude-opus-5")
    assert not TABLE.writes_billed("deepseek-flash") and not TABLE.writes_billed("gemini-2.5-pro")
    assert TABLE.lookup("gpt-5.6").write_ttls == ["30m", "12h"]
    assert TABLE.lookup("claude-opus-5").write_ttls == ["5m", "1h"]


def test_min_cacheable_tokens_are_per_model() -> None:
    assert TABLE.lookup("claude-opus-5").min_cacheable_tokens == 512
    assert TABLE.lookup("claude-opus-4-8").min_cacheable_tokens == 1024
    assert TABLE.lookup("claude-opus-4-7").min_cacheable_tokens == 2048
    assert TABLE.lookup("claude-haiku-4-5").min_cacheable_tokens == 4096
    assert TABLE.lookup("gpt-4.1").min_cacheable_tokens == 1024
    assert TABLE.lookup("gemini-3.5-flash").min_cacheable_tokens == 4096


@pytest.mark.parametrize(
    ("model", "threshold", "low_input", "high_input"),
    [("claude-haiku-5-5", 100_000, 0.10, 0.50), ("gpt-5.5", 272_000, 5, 10), ("gpt-6.1-sol", 272_000, 2, 4), ("gemini-2.5-pro", 200_000, 1.25, 2.5)],
)
def test_long_context_tier_switches_above_threshold(model: str, threshold: int, low_input: float, high_input: float) -> None:
    when = at(2026, 11, 20, 12)
    assert TABLE.rates_for(model, when, threshold).tier.input == low_input
    assert TABLE.rates_for(model, when, threshold + 1).tier.input == high_input
    with pytest.raises(PriceError, match="prompt size is unknown"):
        TABLE.rates_for(model, when, None)


def test_deepseek_peak_hours_by_utc_time() -> None:
    monday = at(2026, 11, 16)
    assert monday.weekday() == 0

    def peak(hour: int, minute: int = 0, day: datetime = monday) -> bool | None:
        return TABLE.rates_for("deepseek-flash", day + timedelta(hours=hour, minutes=minute), 1000).peak

    assert [peak(0, 59), peak(1), peak(3, 59), peak(4), peak(5, 59), peak(6), peak(9, 59), peak(10)] == [
        False, True, True, False, False, True, True, False,
    ]
    assert peak(2, day=at(2026, 11, 21)) is False  # Saturday
    assert TABLE.rates_for("deepseek-flash", monday + timedelta(hours=2), 1000).tier.input == 0.30
    assert TABLE.rates_for("deepseek-flash", monday + timedelta(hours=12), 1000).tier.input == 0.15
    # The same instant given in another timezone is the same price.
    beijing = timezone(timedelta(hours=8))
    assert TABLE.rates_for("deepseek-flash", datetime(2026, 11, 16, 10, 0, tzinfo=beijing), 1).peak is True
    assert TABLE.rates_for("gpt-4.1", monday, 1).peak is None


def test_naive_time_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone"):
        TABLE.rates_for("deepseek-flash", datetime(2026, 11, 16, 2), 1000)


def test_price_change_on_a_date() -> None:
    assert TABLE.rates_for("claude-sonnet-5-5", at(2026, 10, 6, 23, 59), 10).tier.read == 0.20
    assert TABLE.rates_for("claude-sonnet-5-5", at(2026, 10, 7), 10).tier.read == 0.10


def test_dates_without_prices_are_errors() -> None:
    assert TABLE.rates_for("deepseek-chat", at(2026, 7, 23, 12), 10).tier.input == 0.28
    with pytest.raises(PriceError, match="no price in effect on 2026-07-24"):
        TABLE.rates_for("deepseek-chat", at(2026, 7, 24, 12), 10)


def test_bad_snapshots_are_rejected() -> None:
    data = json.loads(TABLE.to_json())
    entry = next(m for m in data["models"] if m["model"] == "claude-sonnet-5-5")
    entry["schedules"][1]["effective_from"] = "2026-10-01"  # overlaps the first schedule
    with pytest.raises(ValueError, match="overlap"):
        PriceSnapshot.model_validate(data)

    data = json.loads(TABLE.to_json())
    tiers = next(m for m in data["models"] if m["model"] == "gpt-5.5")["schedules"][0]["tiers"]
    tiers.reverse()
    with pytest.raises(ValueError, match="tiers must start at 0"):
        PriceSnapshot.model_validate(data)

    data = json.loads(TABLE.to_json())
    data["models"].append({**data["models"][0], "model": "other-model"})  # same aliases/name claims
    data["models"][-1]["aliases"] = [data["models"][0]["model"]]
    with pytest.raises(ValueError, match="claimed by both"):
        PriceTable(PriceSnapshot.model_validate(data))
