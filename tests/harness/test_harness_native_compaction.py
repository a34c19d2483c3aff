"""Provider-native compaction with the real Anthropic SDK over HTTP: the request asks for
`compact_20260112` at the session's threshold (beta header), a streamed `compaction` block is kept
and sent back verbatim, the history before it is folded away, its iterations are billed, the next
call's miss says `compacted`, and a resumed session is rebuilt the same way. Routes without it fall
back to client-side compaction, saying why."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from fake_llm_server import FakeLLMServer, Reply, _sse
from scripted_model import scripted_route

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.session_native import NATIVE_PLACEHOLDER, has_compaction
from hitrate.harness.wire.anthropic_compaction import COMPACT_BETA

SUMMARY = "Task: fix add() in calc.py. Read calc.py; the bug is `a - b`. Next: edit it."
ENCRYPTED = "EqQBCkYIARgCKkBopaque=="
# The compaction guide's billing example: the compaction iteration is outside the top-level counts.
ITERATIONS = [
    {"type": "compaction", "input_tokens": 180000, "output_tokens": 3500,
     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
    {"type": "message", "input_tokens": 23000, "output_tokens": 1000,
     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
]


@dataclass
class CompactingReply:
    """A streamed reply that starts with a `compaction` block (SDK `BetaCompactionBlock`, streamed
    as `content_block_start` + `compaction_delta`s), then text and a tool call."""

    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)


class CompactingServer(FakeLLMServer):
    def _answer(self, handler, record, item) -> None:  # type: ignore[override]
        if not isinstance(item, CompactingReply):
            return super()._answer(handler, record, item)
        model = json.loads(record.body)["model"]
        events: list[bytes] = [
            _sse("message_start", {"type": "message_start", "message": {
                "id": "msg_c", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 23000, "output_tokens": 1, "cache_read_input_tokens": 0,
                          "cache_creation_input_tokens": 0}}}),
            _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "compaction", "content": None}}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "compaction_delta", "content": SUMMARY[:30]}}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "compaction_delta", "content": SUMMARY[30:],
                                                   "encrypted_content": ENCRYPTED}}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("content_block_start", {"type": "content_block_start", "index": 1,
                                         "content_block": {"type": "text", "text": ""}}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 1,
                                         "delta": {"type": "text_delta", "text": "Editing now."}}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ]
        for n, (call_id, name, args) in enumerate(item.tool_calls, start=2):
            events += [
                _sse("content_block_start", {"type": "content_block_start", "index": n,
                                             "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}),
                _sse("content_block_delta", {"type": "content_block_delta", "index": n,
                                             "delta": {"type": "input_json_delta", "partial_json": args}}),
                _sse("content_block_stop", {"type": "content_block_stop", "index": n}),
            ]
        events += [
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                   "usage": {"input_tokens": 23000, "output_tokens": 1000, "cache_read_input_tokens": 0,
                                             "cache_creation_input_tokens": 0, "iterations": ITERATIONS}}),
            _sse("message_stop", {"type": "message_stop"}),
        ]
        self._stream(handler, events, {})


@pytest.fixture
def server():
    s = CompactingServer().start()
    yield s
    s.stop()


def _session(route, workspace, ledger, **config) -> Session:
    return Session(route, workspace, ledger=ledger, sink=EventList(), context=lambda: {"date": "d"},
                   config=SessionConfig(**config), sleep=lambda s: None)


def _anthropic_route(server):
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url}
    return Router(env=env, preflight=False).resolve("anthropic/claude-sonnet-5")


def test_native_compaction_round_trips_the_block_and_bills_its_iterations(server, workspace, ledger) -> None:
    read = json.dumps({"path": "calc.py"})
    server.push(
        Reply(tool_calls=[("toolu_1", "read_file", read)]),
        CompactingReply(tool_calls=[("toolu_2", "read_file", read)]),
        Reply(text="Fixed."),
    )
    session = _session(_anthropic_route(server), workspace, ledger, compaction="native", context_window=20_000,
                       clear_tool_results=False)
    assert session.native_compaction and session.native_fallback is None
    result = Agent(session, limits=AgentLimits(max_steps=5, show_budget=False)).run("Fix add() in calc.py.")
    assert result.status == "end_turn", result.detail

    first, second, third = [r for r in server.requests if r.path.endswith("/messages")]
    for request in (first, second, third):
        assert COMPACT_BETA in request.headers.get("anthropic-beta", "")
        edits = request.json()["context_management"]["edits"]
        assert edits == [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 16000},
                          "pause_after_compaction": False}]
    # The request after the compaction starts at the compacted turn, the block sent back verbatim.
    messages = third.json()["messages"]
    assert messages[0]["role"] == "user" and NATIVE_PLACEHOLDER in messages[0]["content"][0]["text"]
    assert messages[1]["content"][0] == {"type": "compaction", "content": SUMMARY, "encrypted_content": ENCRYPTED}
    assert len(messages) == 3  # placeholder, the compacted turn, its tool result

    rows = ledger.calls(session_id=session.id)
    assert [r.kind for r in rows] == [None, None, None]  # no client-side summary call
    # The compaction iteration is billed on the call that compacted: 23,000 + 180,000 input.
    assert rows[1].usage.fresh_input == 203_000 and rows[1].usage.output == 4_500
    assert rows[2].miss_reason == "compacted"
    assert has_compaction(session.transcript.messages[1])

    resumed = Session.resume(ledger, session.id, _anthropic_route(server), sink=EventList(),
                             context=lambda: {"date": "d"}, sleep=lambda s: None)
    assert resumed.transcript == session.transcript


def test_client_mode_sends_no_context_management(server, workspace, ledger) -> None:
    server.push(Reply(text="ok"))
    session = _session(_anthropic_route(server), workspace, ledger, context_window=20_000)
    Agent(session, limits=AgentLimits(max_steps=1, show_budget=False)).run("Say ok.")
    body = server.requests[-1].json()
    assert "context_management" not in body
    assert COMPACT_BETA not in server.requests[-1].headers.get("anthropic-beta", "")


def test_routes_without_it_fall_back_to_client_side(workspace, ledger) -> None:
    session = _session(scripted_route([]), workspace, ledger, compaction="native", context_window=20_000)
    assert not session.native_compaction
    assert "client-side" in (session.native_fallback or "")


def test_a_compaction_block_carries_its_summary_as_text_for_other_providers() -> None:
    from hitrate.harness.wire.anthropic_compaction import compaction_block

    block = compaction_block({"type": "compaction", "content": None, "_compaction": [{"content": SUMMARY}], "_signature": []})
    assert block.text == SUMMARY and json.loads(block.native.raw) == {"type": "compaction", "content": SUMMARY}
    failed = compaction_block({"type": "compaction", "content": None, "_compaction": [], "_signature": []})
    # A failed compaction (null content) is still sent back: the server treats it as a no-op.
    assert failed.text == "" and json.loads(failed.native.raw) == {"type": "compaction", "content": None}


# ------------------------------------------------------------------------------------------------
# OpenAI Responses: `context_management` with `compact_threshold`, the encrypted compaction item
# ------------------------------------------------------------------------------------------------

RESPONSES_ENCRYPTED = "gAAAAABcompacted-context=="


@dataclass
class CompactingResponse:
    """A Responses stream whose output starts with a `compaction` item (SDK
    `ResponseCompactionItem`), after a `response.compaction.compacting` event, then a function call."""

    call: tuple[str, str, str]


class CompactingResponsesServer(FakeLLMServer):
    def _answer(self, handler, record, item) -> None:  # type: ignore[override]
        if not isinstance(item, CompactingResponse):
            return super()._answer(handler, record, item)
        model = json.loads(record.body)["model"]
        seq = iter(range(1000))

        def event(kind: str, **fields) -> bytes:
            return _sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

        compaction = {"id": "cmp_1", "type": "compaction", "encrypted_content": RESPONSES_ENCRYPTED}
        call_id, name, args = item.call
        call = {"id": "fc_1", "type": "function_call", "call_id": call_id, "name": name, "arguments": args, "status": "completed"}

        def response(status: str, output: list) -> dict:
            return {"id": "resp_c", "object": "response", "created_at": 1764581234, "model": model, "status": status,
                    "output": output, "error": None, "incomplete_details": None, "parallel_tool_calls": True,
                    "tool_choice": "auto", "tools": [],
                    "usage": {"input_tokens": 40000, "input_tokens_details": {"cached_tokens": 30000},
                              "output_tokens": 900, "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": 40900} if status == "completed" else None}

        events = [
            event("response.created", response=response("in_progress", [])),
            event("response.compaction.compacting", item_id="cmp_1", output_index=0),
            event("response.output_item.added", output_index=0, item=compaction),
            event("response.output_item.done", output_index=0, item=compaction),
            event("response.output_item.added", output_index=1, item=dict(call, arguments="", status="in_progress")),
            event("response.function_call_arguments.delta", output_index=1, item_id="fc_1", delta=args),
            event("response.output_item.done", output_index=1, item=call),
            event("response.completed", response=response("completed", [compaction, call])),
        ]
        self._stream(handler, events, {})


def test_responses_compaction_item_is_sent_back_in_place_of_the_history(workspace, ledger) -> None:
    server = CompactingResponsesServer().start()
    try:
        read = json.dumps({"path": "calc.py"})
        server.push(
            Reply(tool_calls=[("call_1", "read_file", read)]),
            CompactingResponse(call=("call_2", "read_file", read)),
            Reply(text="Fixed."),
        )
        env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.url + "/v1"}
        route = Router(env=env, preflight=False).resolve("openai-responses/gpt-5.4")
        session = _session(route, workspace, ledger, compaction="native", context_window=50_000)
        assert session.native_compaction, session.native_fallback
        result = Agent(session, limits=AgentLimits(max_steps=5, show_budget=False)).run("Fix add() in calc.py.")
        assert result.status == "end_turn", result.detail
        bodies = server.bodies("/responses")
        assert all(b["context_management"] == [{"type": "compaction", "compact_threshold": 40000}] for b in bodies)
        items = bodies[2]["input"]
        # The placeholder turn, the compaction item (whole, without its id), the call and its output.
        assert items[0]["role"] == "user" and NATIVE_PLACEHOLDER in json.dumps(items[0])
        assert items[1] == {"type": "compaction", "encrypted_content": RESPONSES_ENCRYPTED}
        assert [i["type"] for i in items[2:4]] == ["function_call", "function_call_output"]  # then the dynamic context
        assert ledger.calls(session_id=session.id)[2].miss_reason == "compacted"
    finally:
        server.stop()


def test_native_mode_asks_the_server_to_clear_tool_uses_in_batches(server, workspace, ledger) -> None:
    server.push(Reply(text="ok"))
    session = _session(_anthropic_route(server), workspace, ledger, compaction="native", context_window=20_000)
    Agent(session, limits=AgentLimits(max_steps=1, show_budget=False)).run("Say ok.")
    request = server.requests[-1]
    clear, compact = request.json()["context_management"]["edits"]
    assert clear == {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 8000},
                     "keep": {"type": "tool_uses", "value": 3}, "clear_at_least": {"type": "input_tokens", "value": 2000}}
    assert compact["type"] == "compact_20260112"
    betas = request.headers.get("anthropic-beta", "")
    assert "compact-2026-01-12" in betas and "context-management-2025-06-27" in betas
