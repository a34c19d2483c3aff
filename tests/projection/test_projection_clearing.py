"""Tool-result clearing: old large results become stubs naming what was there, every call stays
answered, recent results stay verbatim, and the expected-value rule clears only when the tokens
removed save more over the horizon than the rewrite costs."""

from __future__ import annotations

import json

from hitrate.projection.clearing import (
    STUB_PREFIX,
    ClearingPlan,
    TokenPrices,
    cleared,
    decide_clearing,
    horizon,
    is_stub,
    plan_clearing,
)
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, Transcript, UserMessage

ANTHROPIC = TokenPrices(read=0.3e-6, write=3.75e-6, fresh=3e-6)


def _session(rounds: int, result_lines: int = 600) -> Transcript:
    messages: list = [UserMessage(content=(TextBlock(text="Fix the parser."),))]
    for i in range(rounds):
        call = ToolCallBlock(call_id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"src/mod{i}.py"}))
        messages.append(AssistantMessage(content=(TextBlock(text=f"step {i}"), call)))
        messages.append(UserMessage(content=(ToolResultBlock(call_id=f"c{i}", content=f"line {i}\n" * result_lines),)))
    return Transcript(messages=tuple(messages))


def test_old_large_results_become_stubs_naming_the_call() -> None:
    transcript = _session(10)
    plan = plan_clearing(transcript, keep_recent_tokens=3000, min_result_tokens=500)
    assert plan is not None and plan.targets
    after = cleared(transcript, plan)
    stubs = [b for m in after.messages if isinstance(m, UserMessage) for b in m.tool_results if is_stub(b)]
    assert len(stubs) == len(plan.targets)
    first = stubs[0].content
    assert first.startswith(STUB_PREFIX) and "read_file" in first and "src/mod0.py" in first and "tokens" in first
    # Every call is still answered, the recent results are verbatim, and nothing else changed.
    assert [type(m) for m in after.messages] == [type(m) for m in transcript.messages]
    assert after.messages[-1] == transcript.messages[-1]
    assert after.messages[0] == transcript.messages[0]
    assert plan.saved_tokens > 0 and plan.suffix_tokens > 0
    # Clearing again finds nothing new among the stubs.
    again = plan_clearing(after, keep_recent_tokens=3000, min_result_tokens=500)
    assert again is None or all(t.message > max(p.message for p in plan.targets) for t in again.targets)


def test_small_or_recent_results_are_left_alone() -> None:
    assert plan_clearing(_session(10, result_lines=5), keep_recent_tokens=100, min_result_tokens=500) is None
    assert plan_clearing(_session(3), keep_recent_tokens=10**6, min_result_tokens=500) is None


def test_the_rule_weighs_the_saving_over_the_horizon_against_the_rewrite() -> None:
    plan = ClearingPlan(targets=(object(),) * 3, saved_tokens=10_000, suffix_tokens=12_000)  # type: ignore[arg-type]
    # Anthropic: the rewrite costs 12,000 × (3.75 − 0.3) $/M; one turn saves 10,000 × 0.3 $/M.
    assert not decide_clearing(plan, horizon_turns=5, prices=ANTHROPIC).clear
    yes = decide_clearing(plan, horizon_turns=20, prices=ANTHROPIC)
    assert yes.clear and yes.net_usd > 0
    assert abs(yes.rewrite_usd - 12_000 * 3.45e-6) < 1e-12 and abs(yes.saving_usd - 20 * 10_000 * 0.3e-6) < 1e-12
    assert not decide_clearing(None, horizon_turns=50, prices=ANTHROPIC).clear
    assert not decide_clearing(plan, horizon_turns=20, prices=ANTHROPIC, min_net_saving_usd=1.0).clear


def test_the_horizon_is_the_turns_until_the_threshold() -> None:
    assert horizon(40_000, 100_000, 0.8, 2_000) == 20
    assert horizon(79_000, 100_000, 0.8, 2_000) == 1  # at least one turn
    assert horizon(0, 10**7, 0.8, 10) == 50  # at most the cap
