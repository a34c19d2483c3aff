"""The append-only transcript: its conversation rules, freezing of context, JSON round trips."""

from __future__ import annotations

import pytest
from projection_builders import calls, results, user
from pydantic import ValidationError

from hitrate.projection.transcript import (
    AssistantMessage,
    ContextBlock,
    NativeBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
    TranscriptError,
    UserMessage,
)


def test_append_returns_a_new_transcript_sharing_earlier_messages() -> None:
    first = Transcript().append(user("hi"))
    reply = AssistantMessage(content=(TextBlock(text="hello"),))
    second = first.append(reply)
    assert len(first.messages) == 1 and len(second.messages) == 2
    assert second.messages[0] is first.messages[0]


def test_roles_must_alternate_and_start_with_user() -> None:
    with pytest.raises(TranscriptError, match="start with a user"):
        Transcript().append(AssistantMessage(content=(TextBlock(text="x"),)))
    with pytest.raises(TranscriptError, match="in a row"):
        Transcript().append(user("a")).append(user("b"))


def test_parallel_calls_need_exactly_their_results_in_the_next_turn() -> None:
    reply = calls("c", 3)
    t = Transcript().append(user("go")).append(reply)
    with pytest.raises(TranscriptError, match=r"missing \['c-2'\]"):
        t.append(UserMessage(content=tuple(ToolResultBlock(call_id=f"c-{i}", content="x") for i in range(2))))
    with pytest.raises(TranscriptError, match=r"unknown \['zz'\]"):
        t.append(UserMessage(content=(*results(reply).content, ToolResultBlock(call_id="zz", content="x"))))
    done = t.append(results(reply))
    assert [r.call_id for r in done.messages[-1].tool_results] == ["c-0", "c-1", "c-2"]


def test_results_in_a_turn_without_calls_are_refused() -> None:
    t = Transcript().append(user("go")).append(AssistantMessage(content=(TextBlock(text="done"),)))
    with pytest.raises(TranscriptError, match="unknown"):
        t.append(UserMessage(content=(ToolResultBlock(call_id="c", content="x"),)))


def test_user_blocks_are_ordered_results_text_context() -> None:
    ctx = ContextBlock(text="<context>\n</context>", values=())
    with pytest.raises(ValidationError, match="ordered tool_result, then text, then context"):
        UserMessage(content=(ctx, TextBlock(text="late")))
    with pytest.raises(ValidationError, match="ordered"):
        UserMessage(content=(TextBlock(text="a"), ToolResultBlock(call_id="c", content="x")))


def test_duplicate_call_ids_in_one_turn_are_refused() -> None:
    with pytest.raises(ValidationError, match="duplicate tool call ids"):
        AssistantMessage(
            content=(
                ToolCallBlock(call_id="a", name="x", arguments="{}"),
                ToolCallBlock(call_id="a", name="y", arguments="{}"),
            )
        )


def test_tool_arguments_are_kept_as_the_raw_string() -> None:
    raw = '{ "path" :"a.py",  "b": [1,2] }'
    block = ToolCallBlock(call_id="a", name="read_file", arguments=raw)
    assert block.arguments == raw
    assert block.parsed_arguments() == {"path": "a.py", "b": [1, 2]}
    with pytest.raises(TranscriptError, match="malformed JSON arguments"):
        ToolCallBlock(call_id="a", name="x", arguments="{oops").parsed_arguments()


def test_freeze_context_appends_to_the_newest_user_message_only() -> None:
    ctx = ContextBlock(text="<context>\ndate: d\n</context>", values=(("date", "d"),))
    t = Transcript().append(user("hi")).freeze_context(ctx)
    assert t.messages[-1].content[-1] == ctx
    assert t.sent_context() == {"date": "d"}
    assert t.freeze_context(None) is t
    with pytest.raises(TranscriptError, match="newest user message"):
        t.append(AssistantMessage(content=(TextBlock(text="x"),))).freeze_context(ctx)
    removed = ContextBlock(text="<context>\ndate: (removed)\n</context>", values=(("date", None),))
    assert t.freeze_context(removed).sent_context() == {}


def test_messages_are_immutable() -> None:
    message = user("hi")
    with pytest.raises(ValidationError):
        message.content = ()  # type: ignore[misc]
    assert isinstance(message.content, tuple)


def test_transcript_round_trips_through_json_byte_for_byte() -> None:
    reply = AssistantMessage(
        content=(
            ThinkingBlock(thinking="Let me look… 🤔", signature="sig=="),
            TextBlock(text="Reading."),
            ToolCallBlock(
                call_id="toolu_1",
                name="read_file",
                arguments='{"path":"ä.py"}',
                native=NativeBlock(api="anthropic", raw='{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"ä.py"}}'),
            ),
        )
    )
    t = Transcript().append(user("héllo")).append(reply).append(results(reply, "x" * 10))
    again = Transcript.model_validate_json(t.model_dump_json())
    assert again == t
    assert again.messages[1].content[2].native.raw == reply.content[2].native.raw


def test_invalid_json_transcript_is_rejected_with_the_rule_named() -> None:
    bad = '{"messages":[{"role":"assistant","content":[{"type":"text","text":"x"}]}]}'
    with pytest.raises(ValidationError, match="start with a user message"):
        Transcript.model_validate_json(bad)
