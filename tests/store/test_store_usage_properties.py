"""Property tests: whatever usage payload arrives, every normalizer returns a `Usage` (never an
exception), the cost function prices or declines it without raising, and a ledger row stores the
raw payload and the flags as they were."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from usage_payloads import ANTHROPIC, DEEPSEEK, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES, payload

from hitrate.store.cost import cost
from hitrate.store.ledger import Ledger
from hitrate.store.normalize import (
    anthropic_stream_usage,
    as_raw_usage,
    from_anthropic,
    from_deepseek,
    from_gemini,
    from_gemini_openai,
    from_openai_chat,
    from_openai_compatible,
    from_openai_responses,
)
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import BUCKETS, Usage

AT = datetime(2026, 11, 20, 3, tzinfo=timezone.utc)
TABLE = PriceTable.default()
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(usage: Usage, model: str) -> None:
    assert isinstance(usage, Usage)
    for bucket in BUCKETS:
        value = getattr(usage, bucket)
        assert value is None or (isinstance(value, int) and value >= 0)
    if usage.reasoning is not None and usage.output is not None:
        assert usage.reasoning <= usage.output
    assert all(isinstance(flag, str) and ": " in flag for flag in usage.flags)
    priced = cost(usage, model, AT, TABLE)
    if priced.total is None:
        assert priced.unpriced_reason  # an unpriced call always says why
    else:
        assert priced.total >= 0 and priced.unpriced_reason is None


@PROPERTY
@given(payload(ANTHROPIC), st.booleans())
def test_anthropic_never_raises(raw: Any, zero: bool) -> None:
    check(from_anthropic(raw, absent_cache_means_zero=zero), "claude-opus-5-5")


@PROPERTY
@given(payload(ANTHROPIC), payload(ANTHROPIC))
def test_anthropic_stream_never_raises(start: Any, delta: Any) -> None:
    raw, usage = anthropic_stream_usage(start, delta)
    assert isinstance(raw, dict)
    json.dumps(raw)
    check(usage, "claude-sonnet-4-6")


@PROPERTY
@given(payload(OPENAI_CHAT), st.booleans(), st.sampled_from(["30m", "12h"]))
def test_openai_chat_never_raises(raw: Any, billed: bool, ttl: str) -> None:
    check(from_openai_chat(raw, writes_billed=billed, write_ttl=ttl), "gpt-5.6" if billed else "gpt-5.5")  # type: ignore[arg-type]


@PROPERTY
@given(payload(OPENAI_RESPONSES), st.booleans(), st.sampled_from(["30m", "12h"]))
def test_openai_responses_never_raises(raw: Any, billed: bool, ttl: str) -> None:
    check(from_openai_responses(raw, writes_billed=billed, write_ttl=ttl), "gpt-6.1-sol" if billed else "gpt-4.1")  # type: ignore[arg-type]


@PROPERTY
@given(payload(DEEPSEEK))
def test_deepseek_never_raises(raw: Any) -> None:
    check(from_deepseek(raw), "deepseek-flash")


@PROPERTY
@given(payload(GEMINI))
def test_gemini_never_raises(raw: Any) -> None:
    check(from_gemini(raw), "gemini-2.5-pro")


@PROPERTY
@given(payload(OPENAI_CHAT), st.booleans(), payload(st.fixed_dictionaries({}, optional={"cache_n": st.integers(-2, 500)})))
def test_openai_compatible_and_gemini_openai_never_raise(raw: Any, zero: bool, timings: Any) -> None:
    check(from_gemini_openai(raw, absent_cached_means_zero=zero), "gemini-3.5-flash")
    check(from_openai_compatible(raw, absent_cached_means_zero=zero, timings=timings), "gemini-3.5-flash")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payload(ANTHROPIC))
def test_the_ledger_keeps_raw_usage_and_flags(tmp_path: Path, raw: Any) -> None:
    with Ledger(tmp_path / "props.db") as ledger:
        stored_raw = as_raw_usage(raw)
        usage = from_anthropic(raw)
        call = ledger.record_call(
            CallRecord(backend="anthropic", model="claude-opus-5", started_at=AT, usage=usage, raw_usage=stored_raw),
            price_table=TABLE,
        )
        back = next(c for c in ledger.calls() if c.id == call.id)
    assert back.raw_usage == stored_raw
    assert back.usage == usage
    assert back.cost_usd == cost(usage, "claude-opus-5", AT, TABLE).total
