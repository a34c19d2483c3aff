"""What-if over real projected prompts recorded in a real ledger file."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hitrate.harness.call_sections import call_sections
from hitrate.evals.sim_anthropic import AnthropicSimConfig, simulate_anthropic
from hitrate.evals.whatif import WhatIfError, WhatIfOptions, load_requests, parse_target, request_from_call, whatif
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import Usage

from whatif_builders import T0, request

RULES = CacheRules(family="anthropic", min_cacheable_tokens=512)
TOOLS = [
    ToolSpec(name=f"tool_{i}", description="Does one thing well. " * 40, input_schema={"type": "object", "properties": {"x": {"type": "string"}}})
    for i in range(4)
]
SYSTEM = "You are a careful coding agent. " * 150


def drive_session(n_rounds: int, wide_round: int | None = None, context_every: int = 3):
    """Project a tool-using conversation the way the harness does; returns the prompts sent."""
    projector = Projector(RULES, session_id="sess")
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="Fix the failing test in parser.py."),)))
    prompts = []
    for step in range(n_rounds):
        context = {"date": "2026-11-16", "git": f"{step // context_every} files changed"}
        prompt = projector.project(model="claude-sonnet-4-6", tools=TOOLS, system=SYSTEM, transcript=transcript, context=context)
        transcript = transcript.freeze_context(prompt.tail)
        prompts.append(prompt)
        width = 25 if step == wide_round else 2
        blocks: list = [TextBlock(text=f"Step {step}: reading files.")]
        for i in range(width):
            # On the wide round, text between the calls makes each call its own lookback position.
            if step == wide_round:
                blocks.append(TextBlock(text=f"Now file {i}."))
            blocks.append(ToolCallBlock(call_id=f"c{step}-{i}", name="tool_0", arguments='{"x":"a"}'))
        results = tuple(ToolResultBlock(call_id=f"c{step}-{i}", content="line\n" * 40) for i in range(width))
        transcript = transcript.extend([AssistantMessage(content=tuple(blocks)), UserMessage(content=results)])
    return prompts


def record(ledger: Ledger, prompts, *, gap_s: float = 20.0, run_id: str = "run-1", reported_scale: float = 1.0) -> list[CallRecord]:
    """One ledger call per prompt; the provider is taken to have counted `reported_scale` times the
    projection's token estimate, all of it fresh."""
    ledger.start_run(label="demo", run_id=run_id)
    out = []
    for i, prompt in enumerate(prompts):
        call = CallRecord(
            run_id=run_id,
            session_id="sess",
            backend="anthropic",
            model=prompt.model,
            started_at=T0 + timedelta(seconds=gap_s * i),
            ttft_s=0.5,
            latency_s=2.0,
            section_hashes=prompt.section_hashes(),
            sections=call_sections(prompt),
            usage=Usage(
                fresh_input=round(prompt.total_tokens * reported_scale), cache_write_5m=0, cache_write_30m=0, cache_write_1h=0,
                cache_write_12h=0, cache_read=0, output=120,
            ),
        )
        out.append(ledger.record_call(call, price_table=PriceTable.default()))
    return out


def test_planned_marks_replay_exactly_as_the_projection_placed_them(tmp_path):
    prompts = drive_session(8, wide_round=4)
    assert any(bp.purpose == "bridge" for p in prompts for bp in p.breakpoints)
    with Ledger(tmp_path / "l.db") as ledger:
        calls = record(ledger, prompts)
        loaded = [request_from_call(c) for c in ledger.calls(run_id="run-1")]
    assert [c.id for c in calls] == [r.id for r in loaded]
    cfg = dict(min_cacheable_tokens=512)
    planned = simulate_anthropic(loaded, AnthropicSimConfig(**cfg, marks="planned"))
    recorded = simulate_anthropic(loaded, AnthropicSimConfig(**cfg, marks="recorded"))
    assert [p.usage for p in planned] == [p.usage for p in recorded]
    # Every request after the first reads the whole previous request.
    for before, p in zip(prompts, planned[1:]):
        assert p.usage.cache_read == before.total_tokens


def test_whatif_from_the_ledger_puts_predictions_next_to_actuals(tmp_path):
    prompts = drive_session(6)
    with Ledger(tmp_path / "l.db") as ledger:
        record(ledger, prompts)
        loaded = load_requests(ledger, "run-1")
    assert loaded.scope == "run run-1" and len(loaded.requests) == 6
    result = whatif(loaded.requests, parse_target("anthropic/claude-sonnet-4-6"), WhatIfOptions(calibrate=False))
    total = sum(p.total_tokens for p in prompts)
    assert result.actual.fresh_input == total and result.actual.cache_read == 0
    assert result.predicted.cache_read > 0.6 * total
    assert result.actual.cost_usd is not None and result.predicted.cost_usd < result.actual.cost_usd
    assert result.saving_usd == pytest.approx(result.actual.cost_usd - result.predicted.cost_usd)
    naive = whatif(loaded.requests, parse_target("anthropic/claude-sonnet-4-6"), WhatIfOptions(naive=True, calibrate=False))
    assert naive.predicted.cache_read == 0 and naive.predicted.fresh_input == total
    assert naive.predicted.cost_usd > result.predicted.cost_usd
    deepseek = whatif(loaded.requests, parse_target("deepseek/deepseek-flash"), WhatIfOptions(calibrate=False))
    assert deepseek.predicted.cache_read > 0.6 * total
    local = whatif(loaded.requests, parse_target("local"), WhatIfOptions(calibrate=False))
    assert local.predicted.cost_usd is None and local.predicted.cache_read > 0.6 * total
    gemini = whatif(loaded.requests, parse_target("gemini/gemini-2.5-flash"), WhatIfOptions(calibrate=False))
    assert 0 < gemini.predicted.cache_read <= result.predicted.cache_read


def test_a_session_id_selects_that_session(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        record(ledger, drive_session(3))
        loaded = load_requests(ledger, "sess")
    assert loaded.scope == "session sess" and len(loaded.requests) == 3


def test_calibration_scales_prefixes_consistently(tmp_path):
    prompts = drive_session(4)
    with Ledger(tmp_path / "l.db") as ledger:
        # The provider counted 10% more tokens than the projection estimated.
        calls = record(ledger, prompts, reported_scale=1.1)
        loaded = load_requests(ledger, "run-1").requests
    result = whatif(loaded, parse_target("anthropic/claude-sonnet-4-6"))
    assert result.token_scale == pytest.approx(1.1, rel=1e-3)
    reads = [c.predicted.cache_read for c in result.calls]
    prompts_scaled = [c.predicted.prompt_tokens for c in result.calls]
    for previous, read in zip(prompts_scaled, reads[1:]):
        assert read == previous
    assert calls


def test_calls_without_sections_are_refused_with_a_reason(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        ledger.record_call(CallRecord(run_id="old", backend="anthropic", model="claude-sonnet-4-6", started_at=T0))
        with pytest.raises(WhatIfError, match="no per-section token counts"):
            load_requests(ledger, "old")
        with pytest.raises(WhatIfError, match="no calls recorded"):
            load_requests(ledger, "nope")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("anthropic/gpt-4.1", "use --as openai/gpt-4.1"),
        ("anthropic", "names no model"),
        ("mistral/large", "unknown provider"),
        ("openai/gpt-9", "no price for model"),
    ],
)
def test_bad_targets_say_what_to_do(spec, message):
    with pytest.raises(WhatIfError, match=message):
        parse_target(spec)


def test_targets_pick_the_mechanism_and_minimum_from_the_price_table():
    assert parse_target("openai/gpt-4.1").mechanism == "openai_automatic_prefix"
    assert parse_target("openai/gpt-4.1").granularity == 128
    # The price table states no step for gpt-5.5; OpenAI's guide gives 128 for it too.
    assert parse_target("openai/gpt-5.5").granularity == 128
    assert parse_target("openai/gpt-5.5").retention == "24h"  # the only retention gpt-5.5 accepts
    assert parse_target("gemini/gemini-2.5-flash").granularity == 1
    assert parse_target("openai/gpt-5.6").mechanism == "openai_breakpoints"
    assert parse_target("anthropic/claude-haiku-4-5").min_cacheable_tokens == 4096
    assert parse_target("deepseek/deepseek-v4-flash").model == "deepseek-flash"


def test_failed_calls_are_left_out_with_a_note(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        record(ledger, drive_session(2))
        ledger.record_call(
            CallRecord(run_id="run-1", session_id="sess", backend="anthropic", model="claude-sonnet-4-6", started_at=T0, error="HTTP 529 overloaded")
        )
        loaded = load_requests(ledger, "run-1")
    assert len(loaded.requests) == 2
    assert loaded.skipped == ["1 failed call(s) left out (no response, nothing cached)"]


def test_recorded_marks_on_requests_that_carried_none_get_a_note():
    table = PriceTable.default()
    target = parse_target("anthropic/claude-sonnet-5", table)
    unmarked = [request(0, [("tools", "t", 3000), ("system", "s", 500)], rid="r1"),
                request(30, [("tools", "t", 3000), ("system", "s", 500), ("history", "h1", 400)], rid="r2")]
    recorded = whatif(unmarked, target, WhatIfOptions(marks="recorded", calibrate=False), table)
    assert recorded.predicted.cache_read == 0
    assert any("--marks recorded caches nothing" in n for n in recorded.notes)
    planned = whatif(unmarked, target, WhatIfOptions(calibrate=False), table)
    assert not any("--marks recorded" in n for n in planned.notes)
