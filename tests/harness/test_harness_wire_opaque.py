"""Opaque per-call fields round-trip byte for byte, resumes included: Gemini's tool-call
`extra_content.google.thought_signature`, Anthropic thinking `signature` and `redacted_thinking`
data, OpenRouter `reasoning_details`, DeepSeek `reasoning_content` on tool turns. Each reply is
replayed from the provider's documented stream shape through the real SDK to the recording server."""

from __future__ import annotations

from fake_llm_server import RawStream, Reply

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.models import parse_model_spec, quirks_for_openai_base_url
from hitrate.harness.router import Route, Router, rules_for
from hitrate.harness.session import Session
from hitrate.harness.wire.openai_chat import OpenAIChatBackend

LIMITS = AgentLimits(show_budget=False)
READ_CALC = '{"path": "calc.py"}'


def chat_route(server, spec: str, host: str) -> Route:
    """A route for `spec` whose backend has the quirks of the provider's own host but talks to the
    recording server."""
    parsed = parse_model_spec(spec, {})
    backend = OpenAIChatBackend(model=parsed.model, api_key="k", base_url=server.url + "/v1",
                                quirks=quirks_for_openai_base_url(host), label=parsed.label)
    rules, explain = rules_for(parsed)
    return Route(spec=parsed, backend=backend, rules=rules, explain_rules=explain)


def chunk(model: str, delta: dict, finish: str | None = None) -> tuple[None, dict]:
    return (None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764000000, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def usage_chunk(model: str) -> tuple[None, dict]:
    return (None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764000000, "model": model,
                   "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})


def session_for(route, workspace, ledger) -> Session:
    return Session(route, workspace, ledger=ledger, sleep=lambda s: None, context=lambda: {"date": "2026-12-01"})


# ------------------------------------------------------------------------------------------------
# Gemini 3: thought signatures on tool calls
# ------------------------------------------------------------------------------------------------

SIGNATURE_A = "CiQB0e2Kb3sA/+signature+A=="
GEMINI_TOOL_CALL = [
    # ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility": the signature rides
    # on the tool call as extra_content.google.thought_signature.
    chunk("gemini-3.5-flash", {"role": "assistant", "tool_calls": [{
        "extra_content": {"google": {"thought_signature": SIGNATURE_A}},
        "function": {"arguments": READ_CALC, "name": "read_file"},
        "id": "function-call-1", "type": "function", "index": 0}]}),
    chunk("gemini-3.5-flash", {}, "tool_calls"),
    usage_chunk("gemini-3.5-flash"),
]


def test_gemini_thought_signature_goes_back_on_the_next_request_and_after_resume(fake_server, workspace, ledger):
    host = "https://generativelanguage.googleapis.com/v1beta/openai/"
    session = session_for(chat_route(fake_server, "gemini/gemini-3.5-flash", host), workspace, ledger)
    fake_server.push(RawStream(GEMINI_TOOL_CALL), Reply(text="It subtracts."))
    assert Agent(session, limits=LIMITS).run("What does add do?").status == "end_turn"
    second = fake_server.requests[1]
    assistant = next(m for m in second.json()["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"] == [{
        "id": "function-call-1", "type": "function", "function": {"name": "read_file", "arguments": READ_CALC},
        "extra_content": {"google": {"thought_signature": SIGNATURE_A}},
    }]
    assert SIGNATURE_A.replace("/", "\\/") in second.body.decode() or SIGNATURE_A in second.body.decode()

    resumed = Session.resume(ledger, session.id, chat_route(fake_server, "gemini/gemini-3.5-flash", host),
                             sleep=lambda s: None, context=lambda: {"date": "2026-12-01"})
    fake_server.push(Reply(text="Done."))
    Agent(resumed, limits=LIMITS).run("And now?")
    again = next(m for m in fake_server.requests[-1].json()["messages"] if m["role"] == "assistant")
    assert again["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": SIGNATURE_A}}


def test_gemini_signature_on_a_text_reply_goes_back_on_the_message(fake_server, workspace, ledger):
    host = "https://generativelanguage.googleapis.com/v1beta/openai/"
    model = "gemini-3.5-flash"
    signature = {"google": {"thought_signature": "CrICAdHtim827fQ=="}}
    stream = [
        # Seen on the wire: a text reply carries the signature on the first delta itself.
        chunk(model, {"role": "assistant", "content": "It subtracts.", "extra_content": signature}),
        chunk(model, {}, "stop"),
        usage_chunk(model),
    ]
    session = session_for(chat_route(fake_server, f"gemini/{model}", host), workspace, ledger)
    fake_server.push(RawStream(stream), Reply(text="ok"))
    Agent(session, limits=LIMITS).run("What does add do?")
    Agent(session, limits=LIMITS).run("Thanks")
    assistant = next(m for m in fake_server.bodies("/chat/completions")[1]["messages"] if m["role"] == "assistant")
    assert assistant == {"role": "assistant", "content": "It subtracts.", "extra_content": signature}


# ------------------------------------------------------------------------------------------------
# DeepSeek thinking mode: reasoning_content on every tool turn; `reasoning` read too
# ------------------------------------------------------------------------------------------------


def test_deepseek_tool_turns_always_carry_reasoning_content(fake_server, workspace, ledger):
    session = session_for(chat_route(fake_server, "deepseek/deepseek-flash", "https://api.deepseek.com"), workspace, ledger)
    fake_server.push(Reply(tool_calls=[("call_1", "read_file", READ_CALC)]), Reply(text="It subtracts."))
    Agent(session, limits=LIMITS).run("What does add do?")
    assistant = next(m for m in fake_server.bodies("/chat/completions")[1]["messages"] if m["role"] == "assistant")
    # No reasoning streamed, yet the tool turn carries it back (empty): DeepSeek answers 400 otherwise.
    assert assistant["reasoning_content"] == "" and assistant["tool_calls"][0]["id"] == "call_1"


def test_reasoning_in_either_field_goes_back_in_its_own(fake_server, workspace, ledger):
    model = "deepseek-flash"
    stream = [
        chunk(model, {"role": "assistant", "content": ""}),
        chunk(model, {"reasoning": "Read the "}),
        chunk(model, {"reasoning": "file first."}),
        chunk(model, {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                      "function": {"name": "read_file", "arguments": READ_CALC}}]}),
        chunk(model, {}, "tool_calls"),
        usage_chunk(model),
    ]
    session = session_for(chat_route(fake_server, "deepseek/deepseek-flash", "https://api.deepseek.com"), workspace, ledger)
    fake_server.push(RawStream(stream), Reply(text="It subtracts."))
    Agent(session, limits=LIMITS).run("What does add do?")
    assistant = next(m for m in fake_server.bodies("/chat/completions")[1]["messages"] if m["role"] == "assistant")
    assert assistant["reasoning"] == "Read the file first." and assistant["reasoning_content"] == ""


# ------------------------------------------------------------------------------------------------
# OpenRouter: reasoning_details passed back unchanged
# ------------------------------------------------------------------------------------------------


def test_openrouter_reasoning_details_are_assembled_and_sent_back(fake_server, workspace, ledger):
    model = "anthropic/claude-sonnet-5"
    detail = {"type": "reasoning.text", "id": "rd_1", "format": "anthropic-claude-v1", "index": 0}
    stream = [
        # openrouter.ai/docs/use-cases/reasoning-tokens: `reasoning` text plus structured
        # `reasoning_details`, streamed in pieces; the signature comes with the last piece.
        chunk(model, {"role": "assistant", "content": "", "reasoning": "Check ",
                      "reasoning_details": [dict(detail, text="Check ", signature=None)]}),
        chunk(model, {"reasoning": "calc.py.", "reasoning_details": [dict(detail, text="calc.py.", signature=None)]}),
        chunk(model, {"reasoning_details": [dict(detail, text="", signature="c2lnbmF0dXJl")]}),
        chunk(model, {"reasoning_details": [{"type": "reasoning.encrypted", "data": "ZW5jcnlwdGVk", "id": "rd_2",
                                             "format": "anthropic-claude-v1", "index": 1}]}),
        chunk(model, {"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function",
                                      "function": {"name": "read_file", "arguments": READ_CALC}}]}),
        chunk(model, {}, "tool_calls"),
        usage_chunk(model),
    ]
    route = chat_route(fake_server, f"openai-compat/{model}@https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1")
    session = session_for(route, workspace, ledger)
    fake_server.push(RawStream(stream), Reply(text="It subtracts."))
    Agent(session, limits=LIMITS).run("What does add do?")
    assistant = next(m for m in fake_server.bodies("/chat/completions")[1]["messages"] if m["role"] == "assistant")
    assert assistant["reasoning"] == "Check calc.py."
    assert assistant["reasoning_details"] == [
        dict(detail, text="Check calc.py.", signature="c2lnbmF0dXJl"),
        {"type": "reasoning.encrypted", "data": "ZW5jcnlwdGVk", "id": "rd_2", "format": "anthropic-claude-v1", "index": 1},
    ]


# ------------------------------------------------------------------------------------------------
# Anthropic: thinking signatures and redacted thinking
# ------------------------------------------------------------------------------------------------


def anthropic_stream(blocks: list[tuple[dict, list[dict]]], stop: str, stop_details: dict | None = None) -> RawStream:
    """A Messages stream (platform.claude.com/docs/en/build-with-claude/streaming): each block is
    its content_block_start and its deltas."""
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}}})]
    for index, (start, deltas) in enumerate(blocks):
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        for delta in deltas:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta: dict = {"stop_reason": stop, "stop_sequence": None}
    if stop_details is not None:
        delta["stop_details"] = stop_details
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 30}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return RawStream(events)


def anthropic_route(server) -> Route:
    return Router({"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url}, preflight=False).resolve("anthropic/claude-sonnet-5")


SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


def test_anthropic_thinking_signature_and_redacted_thinking_go_back_exactly(fake_server, workspace, ledger):
    fake_server.push(anthropic_stream([
        ({"type": "thinking", "thinking": "", "signature": ""},
         [{"type": "thinking_delta", "thinking": "I should read "}, {"type": "thinking_delta", "thinking": "calc.py."},
          {"type": "signature_delta", "signature": SIGNATURE}]),
        ({"type": "redacted_thinking", "data": REDACTED}, []),
        ({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
         [{"type": "input_json_delta", "partial_json": READ_CALC}]),
    ], "tool_use"), Reply(text="It subtracts."))
    session = session_for(anthropic_route(fake_server), workspace, ledger)
    Agent(session, limits=LIMITS).run("What does add do?")
    assistant = fake_server.bodies("/messages")[1]["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "I should read calc.py.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "calc.py"}},
    ]
    resumed = Session.resume(ledger, session.id, anthropic_route(fake_server), sleep=lambda s: None,
                             context=lambda: {"date": "2026-12-01"})
    fake_server.push(Reply(text="Done."))
    Agent(resumed, limits=LIMITS).run("And now?")
    assert fake_server.bodies("/messages")[-1]["messages"][1] == assistant


def test_a_paused_turn_is_sent_back_as_it_is_and_continued(fake_server, workspace, ledger):
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    fake_server.push(
        # platform.claude.com/docs/en/build-with-claude/handling-stop-reasons#pause-turn
        anthropic_stream([(search, [{"type": "input_json_delta", "partial_json": '{"query": "calc"}'}])], "pause_turn"),
        Reply(text="Found it."),
    )
    session = session_for(anthropic_route(fake_server), workspace, ledger)
    result = Agent(session, limits=LIMITS).run("Look it up")
    assert result.status == "end_turn" and result.steps == 2
    first, second = fake_server.bodies("/messages")
    paused = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "calc"}}
    # The paused content goes back as the last message, with no user turn after it.
    assert second["messages"][-1] == {"role": "assistant", "content": [paused]}
    assert second["messages"][:-1] == [{"role": m["role"], "content": m["content"]} for m in first["messages"]]
    # One assistant turn: the paused part and its continuation.
    last = session.transcript.messages[-1]
    assert [b.type for b in last.content] == ["text", "text"] and last.content[1].text == "Found it."
    resumed = Session.resume(ledger, session.id, anthropic_route(fake_server))
    assert resumed.transcript.messages == session.transcript.messages
    fake_server.push(Reply(text="ok"))
    Agent(resumed, limits=LIMITS).run("thanks")
    assert fake_server.bodies("/messages")[-1]["messages"][1]["content"] == [paused, {"type": "text", "text": "Found it."}]


def test_a_reply_that_fills_the_window_is_reported(fake_server, workspace, ledger):
    fake_server.push(anthropic_stream([({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Partial"}])],
                                      "model_context_window_exceeded"),
                     Reply(text="Summary: the user asked for everything."))
    session = session_for(anthropic_route(fake_server), workspace, ledger)
    result = Agent(session, limits=LIMITS).run("Write everything")
    assert result.status == "context_full"
    assert "filled the model's context window" in result.detail and "model_context_window_exceeded" in result.detail
    # Handed to compaction: the summary request was made and recorded.
    assert "the history was compacted" in result.detail
    assert [r.kind for _, r in session.records] == [None, "compaction"]
