"""Rendering a Prompt into each wire format: marks where planned, model content re-sent as received."""

from __future__ import annotations

import json

from hitrate.harness.models import Quirks
from hitrate.harness.wire.anthropic import RenderReport, render_messages_request
from hitrate.harness.wire.openai_chat import RenderReport as ChatReport
from hitrate.harness.wire.openai_chat import render_chat_request
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import (
    AssistantMessage,
    NativeBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
    UserMessage,
)

TOOLS = [
    ToolSpec(name="zeta", description="z", input_schema={"type": "object", "properties": {"q": {"type": "string"}}}),
    ToolSpec(name="alpha", description="", input_schema={"type": "object", "properties": {}}),
]


def conversation() -> Transcript:
    raw = '{"type":"tool_use","id":"toolu_1","name":"zeta","input":{"q":"x","a":[1,2.50]}}'
    assistant = AssistantMessage(content=(
        ThinkingBlock(thinking="plan", signature="sig=="),
        ThinkingBlock(thinking="foreign reasoning"),  # no signature: cannot go back to Anthropic
        TextBlock(text="calling"),
        ToolCallBlock(call_id="toolu_1", name="zeta", arguments='{"q":"x","a":[1,2.50]}', native=NativeBlock(api="anthropic", raw=raw)),
        ToolCallBlock(call_id="call_2", name="alpha", arguments="{}"),
    ))
    return (
        Transcript()
        .append(UserMessage(content=(TextBlock(text="start"),)))
        .append(assistant)
        .append(UserMessage(content=(
            ToolResultBlock(call_id="toolu_1", content="boom", is_error=True),
            ToolResultBlock(call_id="call_2", content=""),
            TextBlock(text="go on"),
        )))
    )


def test_anthropic_body_layout_marks_and_native_blocks():
    rules = CacheRules(family="anthropic", head_ttl="1h", message_ttl="5m")
    prompt = Projector(rules).project(model="claude-sonnet-5", tools=TOOLS, system="", transcript=conversation(),
                                      context={"date": "2026-01-02"})
    report = RenderReport()
    body = render_messages_request(prompt, max_tokens=99, report=report)
    assert report.unplaced == [] and len(report.placed) == len(prompt.breakpoints) == 2
    # No system or docs: the head mark sits on the last tool (tools sorted by name), with its TTL.
    assert [t["name"] for t in body["tools"]] == ["alpha", "zeta"]
    assert "description" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "system" not in body and body["max_tokens"] == 99
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "plan", "signature": "sig=="}
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    # The native block is sent from its own JSON: key order and values as received.
    assert json.dumps(assistant[2], separators=(",", ":")) == '{"type":"tool_use","id":"toolu_1","name":"zeta","input":{"q":"x","a":[1,2.5]}}'
    assert assistant[3] == {"type": "tool_use", "id": "call_2", "name": "alpha", "input": {}}
    last = body["messages"][2]["content"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": True}
    assert last[1] == {"type": "tool_result", "tool_use_id": "call_2"}
    assert last[2] == {"type": "text", "text": "go on"}
    assert last[3]["text"].startswith("<context>") and last[3]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    # Rendering is a pure function of the prompt.
    assert json.dumps(render_messages_request(prompt, max_tokens=99)) == json.dumps(body)


def test_openai_parts_mode_places_breakpoints_on_content_parts():
    rules = CacheRules(family="openai_breakpoints")
    prompt = Projector(rules, session_id="s1").project(model="gpt-5.6", tools=TOOLS, system="sys", docs="docs",
                                                       transcript=conversation(), context={"date": "d"})
    quirks = Quirks(usage_dialect="openai", send_prompt_cache_key=True, max_tokens_field="max_completion_tokens")
    report = ChatReport()
    body = render_chat_request(prompt, quirks, max_tokens=5, report=report)
    assert body["prompt_cache_key"] == prompt.prompt_cache_key and body["max_completion_tokens"] == 5
    system = body["messages"][0]
    assert system["role"] == "system" and [p["text"] for p in system["content"]] == ["sys", "docs"]
    assert system["content"][1]["prompt_cache_breakpoint"] == {"mode": "explicit", "ttl": "30m"}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assistant = body["messages"][2]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"q":"x","a":[1,2.50]}', "{}"]
    assert "reasoning_content" not in assistant  # thinking from another API is not sent here
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "toolu_1", "content": [{"type": "text", "text": "boom"}]}
    newest = body["messages"][-1]["content"]
    assert newest[-1]["prompt_cache_breakpoint"] == {"mode": "explicit", "ttl": "30m"}
    assert len(report.placed) == len(prompt.breakpoints) - len(report.unplaced)


def test_openai_string_mode_joins_blocks_and_has_no_marks():
    prompt = Projector(CacheRules(family="openai_compat")).project(model="m", tools=[], system="sys", docs="docs",
                                                                      transcript=conversation())
    body = render_chat_request(prompt, Quirks(usage_dialect="openai_compat"), max_tokens=5)
    assert body["messages"][0] == {"role": "system", "content": "sys\n\ndocs"}
    assert body["messages"][2]["content"] == "calling"
    assert body["messages"][-1] == {"role": "user", "content": "go on"}
    assert "tools" not in body and "prompt_cache_key" not in body and body["max_tokens"] == 5



def test_a_cut_off_tool_call_is_never_sent_back_as_invalid_json() -> None:
    # A reply stopped at the output limit in the middle of a call: the streamed argument text is
    # not JSON. Strict servers refuse it ("function.arguments is not valid JSON"), so every wire
    # sends a wrapped, canonical form instead, the same bytes on every request.
    from hitrate.harness.wire.openai_responses import render_responses_request

    cut = '{"path": "big.py", "content": "def f(:\\n  ret'
    chat_raw = json.dumps({"id": "call_9", "type": "function", "function": {"name": "zeta", "arguments": cut}})
    assistant = AssistantMessage(content=(
        ToolCallBlock(call_id="call_9", name="zeta", arguments=cut, native=NativeBlock(api="openai_chat", raw=chat_raw)),
        ToolCallBlock(call_id="call_10", name="alpha", arguments='{"ok": true}'),
    ))
    transcript = Transcript(messages=(
        UserMessage(content=(TextBlock(text="write it"),)),
        assistant,
        UserMessage(content=(ToolResultBlock(call_id="call_9", content="cut off", is_error=True),
                             ToolResultBlock(call_id="call_10", content="ok"))),
    ))
    prompt = Projector(CacheRules(family="openai_implicit")).project(model="m", tools=TOOLS, system="s", transcript=transcript)
    chat = render_chat_request(prompt, Quirks(usage_dialect="openai"), max_tokens=10, report=ChatReport())
    sent = [c["function"]["arguments"] for m in chat["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
    responses = render_responses_request(prompt, Quirks(usage_dialect="openai"), max_output_tokens=10, include_encrypted_reasoning=False,
                                         report=ChatReport())
    sent += [item["arguments"] for item in responses["input"] if item.get("type") == "function_call"]
    assert all(isinstance(json.loads(text), dict) for text in sent)
    assert json.loads(sent[0]) == {"_unparsed_arguments": cut} and sent[1] == '{"ok": true}'  # valid text untouched
    again = render_chat_request(prompt, Quirks(usage_dialect="openai"), max_tokens=10, report=ChatReport())
    assert again == chat
