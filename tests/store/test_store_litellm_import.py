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
    assert not flash.writes_billed and flash.current.tiers[0].input == 0.3  # peak rate only
    assert "peak rate only" in flash.notes
    assert flash.current.peak is None


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


def test_shipped_snapshot_agrees_with_litellm(imported: PriceTable) -> None:
    """Every model in both sources has the same base rates (DeepSeek: LiteLLM's are the peak
    rates). Catches a typo in the hand-kept snapshot."""
    shipped = PriceTable.default()
    compared = 0
    for theirs in imported.models:
        ours = shipped.find(theirs.model)
        if ours is None:
            continue
        our_schedule = ours.current
        our_tier = our_schedule.peak.tiers[0] if our_schedule.peak else our_schedule.tiers[0]
        their_tiers = theirs.current.tiers
        fields = ("input", "output", "write_5m", "write_30m", "write_1h", "write_12h", "read")
        assert [getattr(our_tier, f) for f in fields] == [getattr(their_tiers[0], f) for f in fields], theirs.model
        if not our_schedule.peak:
            assert [t.above_prompt_tokens for t in our_schedule.tiers] == [t.above_prompt_tokens for t in their_tiers], theirs.model
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
