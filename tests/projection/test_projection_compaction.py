"""Cache-aware compaction: the summary request reads the whole history from the cache, the
compacted session keeps its static head cached, and no tool call is parted from its result."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from projection_builders import Session, calls, results, user

from hitrate.projection.cache_view import cache_request
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.compaction import (
    PENDING_RESULT,
    SUMMARY_HEADER,
    compacted,
    compaction_instruction,
    needs_compaction,
    plan_compaction,
    summary_transcript,
)
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolResultBlock, Transcript, UserMessage

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def _long_session(rules: CacheRules, rounds: int = 12) -> Session:
    s = Session(rules=rules, docs="Run `pytest -q` before you finish.\n" * 150)
    s.append(user("Make the parser accept unary minus. " * 20))
    s.send()
    for i in range(rounds):
        s.tool_round(f"r{i}", 1 + i % 3, output=f"output of round {i}\n" * 40)
    return s


def _read_share(rules: CacheRules, before, after) -> float:
    cache = family_for(rules).cache()
    cache.step(cache_request(before, started_at=T0))
    outcome = cache.step(cache_request(after, started_at=T0 + timedelta(seconds=20)))
    return outcome.read / after.total_tokens


def test_the_summary_request_reads_the_whole_history_from_the_cache() -> None:
    for rules in (CacheRules(family="anthropic", min_cacheable_tokens=1024), CacheRules(family="openai_implicit")):
        s = _long_session(rules)
        last = s.prompts[-1]
        s.transcript = summary_transcript(s.transcript, sent=len(last.messages))
        summary = s.send()
        # Every section the last request sent comes back unchanged, in front.
        assert summary.section_hashes()[: len(last.sections) - 1] == last.section_hashes()[:-1]
        share = _read_share(rules, last, summary)
        assert share > 0.9, (rules.family, share)


def test_the_compacted_request_keeps_the_static_head_cached() -> None:
    rules = CacheRules(family="anthropic", min_cacheable_tokens=1024)
    s = _long_session(rules)
    last = s.prompts[-1]
    plan = plan_compaction(s.transcript, keep_recent_tokens=1500)
    assert plan is not None and plan.dropped_tokens > plan.kept_tokens
    s.transcript = compacted(s.transcript, plan, "Task: unary minus. Plan: lexer then parser. Left: tests.")
    after = s.send()
    assert after.head_hash == last.head_hash  # tools, system, docs byte-identical
    assert after.total_tokens < last.total_tokens / 2
    read = _read_share(rules, last, after) * after.total_tokens
    assert read == pytest.approx(after.head_tokens)  # the head mark still reads; the history is new
    first = after.messages[0]
    assert isinstance(first, UserMessage) and first.content[0].text.startswith(SUMMARY_HEADER)


def test_the_newest_turn_is_always_kept_and_a_short_transcript_is_left_alone() -> None:
    one = Transcript(messages=(user("hi"),))
    assert plan_compaction(one, keep_recent_tokens=10) is None
    two = Transcript(messages=(user("hi"), AssistantMessage(content=(TextBlock(text="hello " * 500),)), user("more")))
    plan = plan_compaction(two, keep_recent_tokens=1)
    assert plan is not None and plan.keep_from == 1


def test_the_instruction_is_static_and_the_trigger_is_a_share_of_the_window() -> None:
    assert compaction_instruction() == compaction_instruction()
    assert "Do not call any tool" in compaction_instruction()
    assert needs_compaction(80_000, 100_000) and not needs_compaction(79_999, 100_000)
    assert needs_compaction(50_000, 100_000, threshold=0.5)


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 400)), min_size=1, max_size=12),
    keep=st.integers(1, 4000),
    pending=st.booleans(),
)
def test_no_tool_call_is_ever_parted_from_its_result(rounds, keep, pending) -> None:
    messages: list = [user("start " * 50)]
    for i, (n_calls, size) in enumerate(rounds):
        if n_calls:
            reply = calls(f"c{i}", n_calls)
            messages += [reply, results(reply, "x" * size)]
        else:
            messages += [AssistantMessage(content=(TextBlock(text="y" * size),)), user("next " * 5)]
    if not pending:  # the turn ended with the model's reply
        messages.append(AssistantMessage(content=(TextBlock(text="done"),)))
    transcript = Transcript(messages=tuple(messages))
    # A pending last turn takes the instruction (its results stubbed); everything sent stays as it was.
    sent = len(transcript.messages) - 1 if pending else len(transcript.messages)
    request = summary_transcript(transcript, sent=sent)
    assert request.messages[:sent] == transcript.messages[:sent]
    if pending and transcript.messages[-1].tool_results:
        assert all(b.content == PENDING_RESULT for b in request.messages[-1].tool_results)
    plan = plan_compaction(transcript, keep_recent_tokens=keep)
    if plan is None:
        return
    after = compacted(transcript, plan, "summary")  # the Transcript validators check the roles
    assert after.messages[1:] == transcript.messages[plan.keep_from :]
    answered = {b.call_id for m in after.messages if isinstance(m, UserMessage) for b in m.content if isinstance(b, ToolResultBlock)}
    asked = {c.call_id for m in after.messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    assert answered <= asked
