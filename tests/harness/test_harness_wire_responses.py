"""The OpenAI Responses adapter through the real `openai` SDK over HTTP on 127.0.0.1: the stateless
request it renders, the reply it assembles, usage normalization, stop reasons, retries and errors,
and an agent-loop run through the router with an `openai-responses/...` spec."""

from __future__ import annotations

import json
import random

import pytest
from fake_llm_server import Failure, Reply, StreamError

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList, TextDelta
from hitrate.harness.models import ModelSpecError, Quirks, parse_model_spec
from hitrate.harness.retry import RetryPolicy, call_with_retries
from hitrate.harness.router import Router, rules_for
from hitrate.harness.session import Session
from hitrate.harness.wire_openai_responses import OpenAIResponsesBackend
from hitrate.harness.wire_types import CallError
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import (
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
    UserMessage,
)

OPENAI = Quirks(usage_dialect="openai", send_prompt_cache_key=True, max_tokens_field="max_completion_tokens")
POLICY = RetryPolicy(max_attempts=4, base_delay_s=1.0, max_delay_s=8.0)
TOOL = ToolSpec(name="list_dir", description="List a directory.", input_schema={"type": "object", "properties": {}})


def backend_for(server, model: str = "gpt-5.4", quirks: Quirks = OPENAI, timeout_s: float = 30.0) -> OpenAIResponsesBackend:
    return OpenAIResponsesBackend(model=model, api_key="k", base_url=server.url + "/v1", quirks=quirks, timeout_s=timeout_s)


def prompt_for(transcript: Transcript, model: str = "gpt-5.4", family: str = "openai_implicit"):
    projector = Projector(CacheRules(family=family), session_id="s-1")
    return projector.project(model=model, tools=[TOOL], system="You help.", transcript=transcript, docs="Docs here.")


def hello() -> Transcript:
    return Transcript().append(UserMessage(content=(TextBlock(text="hello"),)))


def test_a_turn_goes_out_whole_and_comes_back_byte_for_byte(fake_server):
    arguments = '{ "path":  "." }'
    fake_server.push(
        Reply(reasoning="Look first.", reasoning_encrypted="gAAAA-opaque", text="Listing.",
              tool_calls=[("call_7", "list_dir", arguments)]),
        Reply(text="Done."),
    )
    backend = backend_for(fake_server)
    deltas: list[str] = []
    transcript = hello()
    result = backend.call(prompt_for(transcript), max_tokens=64, on_text=deltas.append)

    assert "".join(deltas) == "Listing." and result.stop_reason == "tool_use" and result.raw_stop_reason == "completed"
    assert result.request_id == "req_fake" and result.response_id == "resp_fake" and result.model == "gpt-5.4"
    assert result.ttft_s is not None and result.latency_s >= result.ttft_s
    thinking, text, call = result.assistant.content
    assert isinstance(thinking, ThinkingBlock) and thinking.thinking == "Look first."
    # The encrypted reasoning is kept only for this wire, never as a signature other adapters would send.
    assert thinking.signature is None and "gAAAA-opaque" in thinking.native.raw
    assert isinstance(text, TextBlock) and text.text == "Listing."
    assert isinstance(call, ToolCallBlock) and call.arguments == arguments

    first = fake_server.requests[0].json()
    assert first["instructions"] == "You help.\n\nDocs here."
    assert first["tools"] == [{"type": "function", "name": "list_dir", "description": "List a directory.",
                               "parameters": {"type": "object", "properties": {}}, "strict": False}]
    assert first["input"] == [{"type": "message", "role": "user", "content": "hello"}]
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert first["max_output_tokens"] == 64 and first["prompt_cache_key"].startswith("hitrate-")

    transcript = transcript.append(result.assistant).append(
        UserMessage(content=(ToolResultBlock(call_id="call_7", content="calc.py"), TextBlock(text="go on")))
    )
    backend.call(prompt_for(transcript), max_tokens=64)
    second = fake_server.requests[1].json()
    assert second["input"][0] == first["input"][0]
    assert second["input"][1:] == [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look first."}], "encrypted_content": "gAAAA-opaque"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
        {"type": "function_call", "call_id": "call_7", "name": "list_dir", "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_7", "output": "calc.py"},
        {"type": "message", "role": "user", "content": "go on"},
    ]


def test_breakpoints_ride_on_input_text_parts(fake_server):
    fake_server.push(Reply(text="ok"))
    backend = backend_for(fake_server, model="gpt-5.6")
    prompt = prompt_for(hello(), model="gpt-5.6", family="openai_breakpoints")
    backend.call(prompt, max_tokens=16)
    body = fake_server.requests[0].json()
    assert body["input"] == [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "hello", "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "30m"}}]}]
    assert [m.purpose for m in backend.last_report.placed] == ["newest"]
    assert [m.kind for m in backend.last_report.unplaced] == ["docs"]  # instructions is a plain string


def test_no_prompt_cache_key_for_servers_other_than_openai(fake_server):
    fake_server.push(Reply(text="ok"))
    backend_for(fake_server, quirks=Quirks(usage_dialect="openai_compat")).call(prompt_for(hello()), max_tokens=8)
    assert "prompt_cache_key" not in fake_server.requests[0].json()


@pytest.mark.parametrize(
    ("model", "usage", "expected"),
    [
        # GPT <= 5.5: cached tokens inside input_tokens, writes free; reasoning is a subset of output.
        ("gpt-5.4", {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1920}, "output_tokens": 300,
                     "output_tokens_details": {"reasoning_tokens": 100}, "total_tokens": 2306},
         {"fresh_input": 86, "cache_read": 1920, "cache_write_30m": 0, "output": 300, "reasoning": 100}),
        # GPT-5.6: billed writes are a subset of input_tokens too, booked under the 30m default TTL.
        ("gpt-5.6", {"input_tokens": 10000, "input_tokens_details": {"cached_tokens": 6000, "cache_write_tokens": 3000},
                     "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 20}},
         {"fresh_input": 1000, "cache_read": 6000, "cache_write_30m": 3000, "cache_write_12h": 0, "output": 50}),
        # ... or split by retention when the payload says so.
        ("gpt-5.6", {"input_tokens": 4000, "input_tokens_details": {
            "cached_tokens": 0, "cache_write_tokens": 3000,
            "cache_write_tokens_details": {"ttl_30m_tokens": 2000, "ttl_12h_tokens": 1000}}, "output_tokens": 5},
         {"fresh_input": 1000, "cache_write_30m": 2000, "cache_write_12h": 1000}),
        # A model the price table does not know: the payload's write count is trusted.
        ("gpt-9-preview", {"input_tokens": 500, "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 300},
                           "output_tokens": 5}, {"fresh_input": 100, "cache_write_30m": 300}),
        # No cached count reported: unknown, never zero.
        ("gpt-5.4", {"input_tokens": 500, "output_tokens": 9}, {"fresh_input": None, "cache_read": None, "output": 9}),
    ],
)
def test_usage_normalization(fake_server, model, usage, expected):
    fake_server.push(Reply(text="ok", usage=usage))
    result = backend_for(fake_server, model=model).call(prompt_for(hello(), model=model), max_tokens=8)
    assert {k: getattr(result.usage, k) for k in expected} == expected
    assert result.raw_usage == usage
    assert result.usage.prompt_total == usage["input_tokens"]


def test_usage_that_contradicts_the_price_table_is_kept_and_flagged(fake_server):
    usage = {"input_tokens": 100, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 50}}
    fake_server.push(Reply(text="ok", usage=usage))
    result = backend_for(fake_server).call(prompt_for(hello()), max_tokens=8)
    # The provider billed the call: it is kept, priced by the table (writes free = fresh input), flagged.
    assert result.raw_usage == usage
    assert (result.usage.fresh_input, result.usage.cache_write_total) == (100, 0)
    assert result.usage.flag_codes() == ["unexpected_cache_write_tokens"]


@pytest.mark.parametrize(("stop", "mapped"), [("max_output_tokens", "max_tokens"), ("content_filter", "refusal")])
def test_incomplete_responses_say_why(fake_server, stop, mapped):
    fake_server.push(Reply(text="partial", stop=stop))
    result = backend_for(fake_server).call(prompt_for(hello()), max_tokens=8)
    assert (result.stop_reason, result.raw_stop_reason) == (mapped, stop)
    assert result.assistant.content[0].text == "partial" and result.usage.output == 5


def test_text_only_reply_ends_the_turn(fake_server):
    fake_server.push(Reply(text="All done."))
    result = backend_for(fake_server).call(prompt_for(hello()), max_tokens=8)
    assert result.stop_reason == "end_turn"


def run(backend, retried):
    prompt = prompt_for(hello())
    slept: list[float] = []
    result = call_with_retries(lambda attempt: backend.call(prompt, max_tokens=10), POLICY, sleep=slept.append,
                               rng=random.Random(0), on_retry=lambda e, a, d: retried.append((e.kind, e.status)))
    return result, slept


def test_429_then_success(fake_server):
    fake_server.push(Failure(429, {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "slow down"}},
                             {"retry-after": "3"}), Reply(text="ok"))
    retried: list = []
    result, slept = run(backend_for(fake_server), retried)
    assert result.assistant.content[0].text == "ok"
    assert retried == [("rate_limited", 429)] and slept == [3.0] and len(fake_server.requests) == 2


@pytest.mark.parametrize(("item", "kind"), [
    (StreamError("rate_limit_exceeded"), "rate_limited"),
    (StreamError("server_error", failed=True), "server_error"),
])
def test_errors_inside_a_stream_are_retried(fake_server, item, kind):
    fake_server.push(item, Reply(text="ok"))
    retried: list = []
    result, _ = run(backend_for(fake_server), retried)
    assert retried == [(kind, 200)] and result.assistant is not None


def test_a_failed_response_that_cannot_succeed_fails_fast(fake_server):
    fake_server.push(StreamError("invalid_prompt", failed=True), Reply(text="never"))
    with pytest.raises(CallError) as info:
        run(backend_for(fake_server), [])
    assert info.value.kind == "bad_response" and info.value.attempts == 1 and len(fake_server.requests) == 1


def test_bad_request_fails_fast_with_the_servers_message(fake_server):
    fake_server.push(Failure(400, {"error": {"type": "invalid_request_error", "param": "input",
                                             "message": "Invalid 'input[0].content'"}}))
    with pytest.raises(CallError) as info:
        run(backend_for(fake_server), [])
    assert info.value.kind == "client_error" and info.value.status == 400 and "input[0].content" in str(info.value)


def test_a_model_that_refuses_encrypted_reasoning_is_asked_again_without_it(fake_server):
    refusal = {"error": {"type": "invalid_request_error", "param": "include", "code": None,
                         "message": "Encrypted content is not supported with this model."}}
    fake_server.push(Failure(400, refusal), Reply(text="ok"), Reply(text="again"))
    backend = backend_for(fake_server, model="gpt-4.1")
    assert backend.call(prompt_for(hello(), model="gpt-4.1"), max_tokens=8).assistant.content[0].text == "ok"
    backend.call(prompt_for(hello(), model="gpt-4.1"), max_tokens=8)
    sent = [r.json() for r in fake_server.requests]
    assert [("include" in b) for b in sent] == [True, False, False]


def test_model_spec_and_router(fake_server):
    spec = parse_model_spec("openai-responses/gpt-5.6", env={})
    assert (spec.wire, spec.base_url, spec.api_key_env, spec.label) == (
        "openai_responses", "https://api.openai.com/v1", "OPENAI_API_KEY", "openai-responses/gpt-5.6")
    assert spec.quirks.send_prompt_cache_key
    assert rules_for(spec)[0].family == "openai_breakpoints"
    assert rules_for(parse_model_spec("openai-responses/gpt-5.4", env={}))[0].family == "openai_implicit"
    with pytest.raises(ModelSpecError, match="set OPENAI_API_KEY"):
        Router({}).resolve("openai-responses/gpt-5.6")
    route = Router({"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": fake_server.url + "/v1"}).resolve("openai-responses/gpt-5.4")
    try:
        assert isinstance(route.backend, OpenAIResponsesBackend) and route.backend.wire == "openai_responses"
        assert route.backend.base_url == fake_server.url + "/v1" and route.backend_name == "openai-responses"
    finally:
        route.close()


def test_agent_loop_through_the_router(fake_server, workspace, ledger):
    fix = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
    cached = {"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1280}, "output_tokens": 12,
              "output_tokens_details": {"reasoning_tokens": 4}}
    fake_server.push(
        Reply(text="Reading.", reasoning_encrypted="enc-1", tool_calls=[("call_a", "read_file", '{"path": "calc.py"}')]),
        Reply(tool_calls=[("call_b", "edit_file", json.dumps(fix))], usage=cached),
        Reply(text="Fixed.", usage=cached),
    )
    route = Router({"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": fake_server.url + "/v1"}).resolve("openai-responses/gpt-5.4")
    events = EventList()
    session = Session(route, workspace, ledger=ledger, sink=events, sleep=lambda s: None,
                      context=lambda: {"date": "2026-01-02", "workspace": "ws"})
    result = Agent(session, limits=AgentLimits(max_steps=5)).run("Fix add in calc.py")
    assert result.status == "end_turn" and result.steps == 3, result.detail
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "".join(e.text for e in events.of(TextDelta)) == "Reading.Fixed."

    bodies = [r.json() for r in fake_server.requests]
    assert all(r.path == "/v1/responses" and r.headers["authorization"] == "Bearer o" for r in fake_server.requests)
    assert bodies[2]["input"][: len(bodies[1]["input"])] == bodies[1]["input"]
    assert any(i.get("encrypted_content") == "enc-1" for i in bodies[2]["input"])
    outputs = [i for i in bodies[2]["input"] if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_a", "call_b"] and "return a - b" in outputs[0]["output"]

    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 3 and {r.backend for r in rows} == {"openai-responses"} and {r.model for r in rows} == {"gpt-5.4"}
    assert (rows[1].usage.fresh_input, rows[1].usage.cache_read, rows[1].usage.reasoning) == (220, 1280, 4)
    assert all(r.error is None and r.cost_usd is not None and r.cost_usd > 0 for r in rows)


def test_items_without_their_done_event_are_rebuilt_from_deltas():
    from hitrate.harness.wire_openai_responses import _Output

    output = _Output()
    output.added[0] = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "cut-sho"}
    output.added[1] = {"type": "message", "role": "assistant", "content": []}
    output.text[1] = ["Hel", "lo"]
    output.added[2] = {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": ""}
    output.arguments[2] = ['{"pattern":', ' "x"}']
    items = output.items([])
    # An unfinished reasoning item's encrypted content may be cut short: it is not kept for replay.
    assert items[0]["encrypted_content"] is None
    assert items[1]["content"] == [{"type": "output_text", "text": "Hello"}]
    assert items[2]["arguments"] == '{"pattern": "x"}'
    # A finished item, or the completed response's output, wins over the deltas.
    output.done[2] = dict(items[2], arguments='{"pattern": "y"}')
    assert output.items([])[2]["arguments"] == '{"pattern": "y"}'
    assert output.items([{"type": "reasoning", "summary": [], "encrypted_content": "whole"}])[0]["encrypted_content"] == "whole"
