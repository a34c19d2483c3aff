"""Breakpoint planning per provider, on concrete sessions."""

from __future__ import annotations

import pytest
from projection_builders import ANTHROPIC, TOOLS, Session, calls, results, user
from pydantic import ValidationError

from hitrate.projection.caching import CacheRules
from hitrate.projection.explain import explain_miss
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ThinkingBlock, ToolCallBlock, UserMessage


def _targets_are_markable(prompt: Prompt) -> None:
    for mark in prompt.breakpoints:
        if mark.message_index is None:
            continue
        block = prompt.messages[mark.message_index].content[mark.block_index]
        assert not isinstance(block, ThinkingBlock)
        assert not (isinstance(block, TextBlock) and block.text == "")


def _burst(prefix: str, pairs: int) -> AssistantMessage:
    """One long model turn: text, call, text, call, ... (text between calls breaks the tool run)."""
    blocks: list = []
    for i in range(pairs):
        blocks.append(TextBlock(text=f"step {i}"))
        blocks.append(ToolCallBlock(call_id=f"{prefix}{i}", name="bash", arguments='{"command":"ls"}'))
    return AssistantMessage(content=tuple(blocks))


def test_a_short_turn_gets_a_head_mark_and_a_moving_newest_mark() -> None:
    s = Session(docs="Project docs. " * 100)
    s.append(user("start " * 50))
    first = s.send()
    assert [(b.purpose, b.kind, b.ttl) for b in first.breakpoints] == [("head", "docs", "5m"), ("newest", "tail", "5m")]
    head = first.breakpoints[0]
    assert head.prefix_tokens == first.head_tokens and head.section == 2
    second = s.tool_round("a", 1)
    newest = second.breakpoints[-1]
    assert newest.message_index == len(second.messages) - 1
    assert newest.block_index == len(second.messages[-1].content) - 1
    assert second.breakpoints[0] == head
    _targets_are_markable(second)


def test_head_mark_falls_back_to_system_then_last_tool() -> None:
    s = Session(docs="")
    s.append(user("x " * 600))
    assert s.send().breakpoints[0].kind == "system"
    s = Session(docs="", system="")
    s.append(user("x " * 600))
    head = s.send().breakpoints[0]
    assert (head.kind, head.block_index) == ("tools", len(TOOLS) - 1)


def test_a_long_tool_call_burst_gets_a_bridge_on_the_previous_end() -> None:
    s = Session()
    s.append(user("start " * 200))
    first = s.send()
    burst = _burst("b", 15)  # 30 positions, more than the 20-position lookback
    s.append(burst, results(burst, "done"))
    second = s.send()
    purposes = [b.purpose for b in second.breakpoints]
    assert purposes == ["head", "bridge", "newest"]
    bridge = second.breakpoints[1]
    assert bridge.position == first.breakpoints[-1].position
    assert (bridge.message_index, bridge.block_index) == (0, len(first.messages[0].content) - 1)
    assert second.breakpoints[-1].position - bridge.position > ANTHROPIC.lookback
    _targets_are_markable(second)
    verdict = explain_miss(first, second, seconds_since_previous=5, previous_model="model-a", current_model="model-a",
                           rules=ANTHROPIC, reported_cache_read=None)
    assert verdict.reason == "hit"


def test_no_bridge_when_the_turn_stays_within_lookback() -> None:
    s = Session()
    s.append(user("start " * 200))
    s.send()
    burst = _burst("b", 8)  # 16 positions + results + context
    s.append(burst, results(burst))
    assert [b.purpose for b in s.send().breakpoints] == ["head", "newest"]


def test_many_parallel_calls_in_one_turn_count_as_one_position() -> None:
    s = Session()
    s.append(user("start " * 200))
    first = s.send()
    second = s.tool_round("p", 40)
    assert [b.purpose for b in second.breakpoints] == ["head", "newest"]
    calls_section = second.sections[len(first.sections)]
    assert len(set(calls_section.block_positions)) == 1 and len(calls_section.block_positions) == 40
    results_section = second.sections[len(first.sections) + 1]
    assert len(set(results_section.block_positions)) == 1
    # calls (1) + results (1) + the context change? no change, so newest is the result run.
    assert second.breakpoints[-1].position - first.breakpoints[-1].position == 2


def test_tiny_prompts_under_the_minimum_get_no_marks() -> None:
    s = Session(rules=CacheRules(family="anthropic", min_cacheable_tokens=4096))
    s.append(user("hi"))
    prompt = s.send()
    assert prompt.breakpoints == ()
    assert any("below the 4096-token minimum" in n for n in prompt.notes)


def test_a_head_under_the_minimum_is_not_marked_but_a_long_history_is() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=2048)
    s = Session(rules=rules)
    s.append(user("word " * 3000))
    prompt = s.send()
    assert [b.purpose for b in prompt.breakpoints] == ["newest"]
    assert prompt.breakpoints[0].prefix_tokens >= 2048
    assert any("static head" in n for n in prompt.notes)


def test_one_hour_head_before_five_minute_messages_and_bad_order_refused() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=256, head_ttl="1h")
    s = Session(rules=rules, docs="d " * 400)
    s.append(user("hi " * 200))
    assert [b.ttl for b in s.send().breakpoints] == ["1h", "5m"]
    with pytest.raises(ValidationError, match="1h entries must come before 5m"):
        CacheRules(family="anthropic", head_ttl="5m", message_ttl="1h")
    with pytest.raises(ValidationError, match="not one of"):
        CacheRules(family="anthropic", head_ttl="30m")
    with pytest.raises(ValidationError, match="not one of"):
        CacheRules(family="deepseek", head_ttl="5m")


def test_a_small_mark_budget_leaves_the_bridge_out_and_says_so() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=200, max_marks=2)
    s = Session(rules=rules)
    s.append(user("start " * 200))
    s.send()
    burst = _burst("b", 15)
    s.append(burst, results(burst))
    prompt = s.send()
    assert [b.purpose for b in prompt.breakpoints] == ["head", "newest"]
    assert any("no room for a bridge" in n for n in prompt.notes)


def test_epoch_change_moves_the_head_mark_to_the_new_head() -> None:
    s = Session()
    s.append(user("start " * 200))
    before = s.send()
    s.append(calls("a", 1), results(calls("a", 1)))
    after = s.send(system="A different system prompt.")
    assert after.epoch_started
    assert after.breakpoints[0].purpose == "head"
    assert after.sections[2].hash != before.sections[2].hash
    assert len(after.breakpoints) <= 4
    _targets_are_markable(after)


def test_thinking_and_empty_text_are_never_marked() -> None:
    s = Session()
    s.append(user("start " * 200))
    s.send()
    reply = AssistantMessage(
        content=(ThinkingBlock(thinking="t" * 400, signature="s"), TextBlock(text=""),
                 ToolCallBlock(call_id="x", name="bash", arguments="{}"))
    )
    s.append(reply, results(reply))
    prompt = s.send()
    section = next(sec for sec in prompt.sections if sec.message_index == 1)
    assert section.markable == (False, False, True)
    _targets_are_markable(prompt)


def test_openai_breakpoint_models_keep_earlier_request_ends_marked() -> None:
    rules = CacheRules(family="openai_breakpoints", min_cacheable_tokens=256)
    s = Session(rules=rules)
    s.append(user("start " * 200))
    first = s.send()
    assert [(b.purpose, b.ttl) for b in first.breakpoints] == [("newest", "30m")]  # head below minimum
    s.tool_round("a", 2)
    third = s.tool_round("b", 1)
    assert [b.purpose for b in third.breakpoints] == ["sticky", "sticky", "newest"]
    assert third.breakpoints[0].position == first.breakpoints[0].position
    assert third.prompt_cache_key == first.prompt_cache_key
    _targets_are_markable(third)


def test_openai_breakpoints_keep_only_the_latest_searched_marks() -> None:
    rules = CacheRules(family="openai_breakpoints", min_cacheable_tokens=0, searched_marks=5)
    s = Session(rules=rules)
    s.append(user("start"))
    s.send()
    for i in range(8):
        prompt = s.tool_round(f"r{i}", 1)
    assert len(prompt.breakpoints) == 5
    assert prompt.breakpoints[-1].purpose == "newest"
    assert any("latest 5" in n for n in prompt.notes)


@pytest.mark.parametrize("family", ["openai_implicit", "deepseek", "openai_compat", "local"])
def test_prefix_caching_providers_get_no_marks(family: str) -> None:
    s = Session(rules=CacheRules(family=family, min_cacheable_tokens=0))
    s.append(user("start " * 500))
    s.send()
    prompt = s.tool_round("a", 3)
    assert prompt.breakpoints == () and prompt.family == family
    assert (prompt.prompt_cache_key is not None) == (family == "openai_implicit")


def test_planning_is_deterministic_and_only_looks_at_sections() -> None:
    a, b = Session(), Session()
    for s in (a, b):
        s.append(user("go " * 300))
        s.send()
        burst = _burst("q", 12)
        s.append(burst, UserMessage(content=(*results(burst).content, TextBlock(text="and also this"))))
        s.send()
    assert a.prompts[-1].breakpoints == b.prompts[-1].breakpoints
    assert [p.section_hashes() for p in a.prompts] == [p.section_hashes() for p in b.prompts]
