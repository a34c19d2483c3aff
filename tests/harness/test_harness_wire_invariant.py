"""The wire invariant, per adapter (Anthropic Messages, OpenAI Chat, OpenAI Responses), on the bodies
the real SDKs put on the wire.

Over a 30-turn session with tool calls (single, parallel, with and without text), driven by the real
agent loop against a recording server on 127.0.0.1: every request's tools and system are
byte-identical to the previous request's; its messages start with the previous request's messages,
each byte-identical once cache marks are set aside; and the marks sit exactly where the projection
planned them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from fake_llm_server import Recorded, Reply

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.models import Quirks, parse_model_spec
from hitrate.harness.router import Route, rules_for
from hitrate.harness.session import Session
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.harness.wire.openai_responses import OpenAIResponsesBackend

TURNS = 30


def _arguments(k: int) -> list[tuple[str, str]]:
    # Odd spacing on purpose: the exact text must survive into the next request.
    if k % 3 == 0:
        return [("list_dir", "{}"), ("read_file", '{"path":  "calc.py" }')]
    if k % 3 == 1:
        return [("read_file", '{ "path": "calc.py", "start_line": 1 }')]
    return [("grep", '{"pattern": "add",\n "path": "."}')]


def scripted_reply(prefix: str):
    count = {"n": 0}

    def reply(record: Recorded) -> Reply:
        count["n"] += 1
        k = count["n"]
        if k > TURNS:
            return Reply(text="All done.")
        calls = [(f"{prefix}_{k}_{i}", name, args) for i, (name, args) in enumerate(_arguments(k))]
        return Reply(text=f"Step {k}." if k % 2 else "", tool_calls=calls)

    return reply


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def strip_marks(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: strip_marks(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [strip_marks(v, key) for v in value]
    return value


def count_key(value: Any, key: str) -> int:
    if isinstance(value, dict):
        return (key in value) + sum(count_key(v, key) for v in value.values())
    if isinstance(value, list):
        return sum(count_key(v, key) for v in value)
    return 0


class Capture:
    """Wraps a backend to keep each call's Prompt and render report next to the wire body."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.calls: list[tuple[Any, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def call(self, prompt, **kwargs):
        result = self.backend.call(prompt, **kwargs)
        self.calls.append((prompt, self.backend.last_report))
        return result


def run_session(route: Route, workspace, ledger) -> Session:
    session = Session(route, workspace, ledger=ledger, sink=EventList(), sleep=lambda s: None,
                      context=lambda: {"date": "2026-01-02", "workspace": "ws"})
    result = Agent(session, limits=AgentLimits(max_steps=TURNS + 5)).run("Inspect calc.py thoroughly.")
    assert result.status == "end_turn", result.detail
    assert result.steps == TURNS + 1
    return session


def assert_append_only(raw: list[Recorded], mark_key: str, head_keys: tuple[str, ...]) -> list[dict]:
    bodies = [json.loads(r.body) for r in raw]
    assert len(bodies) == TURNS + 1
    for n in range(1, len(bodies)):
        prev, cur = bodies[n - 1], bodies[n]
        for key in head_keys:
            if key in prev or key in cur:
                # Byte-identical, marks included (the head mark does not move within an epoch), and
                # the bytes compared are the ones actually sent.
                assert dumps(cur[key]) == dumps(prev[key]), f"request {n}: {key} changed"
                assert dumps(cur[key]) in raw[n].body
        prev_msgs, cur_msgs = prev["messages"], cur["messages"]
        assert len(cur_msgs) > len(prev_msgs)
        for i, (a, b) in enumerate(zip(prev_msgs, cur_msgs)):
            assert dumps(strip_marks(a, mark_key)) == dumps(strip_marks(b, mark_key)), f"request {n}: message {i} changed"
    return bodies


def test_anthropic_adapter_wire_invariant(fake_server, workspace, ledger, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_server.url)
    fake_server.default = scripted_reply("toolu")
    spec = parse_model_spec("anthropic/claude-sonnet-5")
    rules, explain = rules_for(spec)
    # A small minimum so marks are planned on this short test conversation.
    rules = rules.model_copy(update={"min_cacheable_tokens": 64})
    backend = Capture(AnthropicBackend(model=spec.model, api_key="test-key", base_url=spec.base_url))
    run_session(Route(spec=spec, backend=backend, rules=rules, explain_rules=rules), workspace, ledger)

    raw = [r for r in fake_server.requests if r.path == "/v1/messages"]
    bodies = assert_append_only(raw, "cache_control", ("tools", "system"))
    assert all(len(p.breakpoints) >= 2 for p, _ in backend.calls)  # the head and the newest message
    for body, (prompt, report) in zip(bodies, backend.calls):
        assert report.unplaced == []
        assert count_key(body, "cache_control") == len(prompt.breakpoints) <= 4
        for mark in prompt.breakpoints:
            if mark.kind == "tools":
                block = body["tools"][mark.block_index]
            elif mark.kind in ("system", "docs"):
                block = body["system"][0 if mark.kind == "system" or not prompt.system else 1]
            else:
                block = body["messages"][mark.message_index]["content"][mark.block_index]
            assert block["cache_control"] == {"type": "ephemeral", "ttl": mark.ttl}
    # Assistant tool_use blocks come back with exactly the input the model streamed.
    last = bodies[-1]["messages"]
    uses = [b for m in last if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    assert len(uses) == sum(len(_arguments(k)) for k in range(1, TURNS + 1))
    assert uses[0]["input"] == json.loads(_arguments(1)[0][1])
    assert list(uses[0]["input"]) == ["path", "start_line"]
    results = [b for m in last if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert {r["tool_use_id"] for r in results} == {u["id"] for u in uses}
    assert all(r.headers.get("authorization") == "Bearer test-key" or r.headers.get("x-api-key") == "test-key" for r in raw)


@pytest.mark.parametrize("family", ["openai_compat", "openai_breakpoints"])
def test_openai_chat_adapter_wire_invariant(fake_server, workspace, ledger, family):
    fake_server.default = scripted_reply("call")
    base = fake_server.url + "/v1"
    if family == "openai_breakpoints":
        # OpenAI's own quirks (prompt_cache_key, max_completion_tokens) and GPT-5.6 explicit marks.
        spec = parse_model_spec("openai/gpt-5.6", env={"OPENAI_BASE_URL": base})
        quirks = Quirks(usage_dialect="openai", send_prompt_cache_key=True, max_tokens_field="max_completion_tokens")
        spec = spec.model_copy(update={"quirks": quirks})
    else:
        spec = parse_model_spec(f"openai-compat/qwen-coder@{base}", env={})
        quirks = spec.quirks
    rules, _ = rules_for(spec)
    assert rules.family == family
    backend = Capture(OpenAIChatBackend(model=spec.model, api_key="k", base_url=base, quirks=quirks))
    session = run_session(Route(spec=spec, backend=backend, rules=rules, explain_rules=rules), workspace, ledger)

    raw = [r for r in fake_server.requests if r.path == "/v1/chat/completions"]
    bodies = assert_append_only(raw, "prompt_cache_breakpoint", ("tools",))
    for n in range(1, len(bodies)):
        assert dumps(bodies[n]["messages"][0]) == dumps(bodies[0]["messages"][0])  # the system message
    keys = {b.get("prompt_cache_key") for b in bodies}
    if family == "openai_breakpoints":
        assert keys == {backend.calls[0][0].prompt_cache_key} and None not in keys
        assert all("max_completion_tokens" in b for b in bodies)
        for body, (prompt, report) in zip(bodies, backend.calls):
            assert prompt.breakpoints
            # Marks land on content parts; a mark on a tool definition or a tool call cannot be sent.
            assert all(m.kind == "tools" or m.kind in ("history", "tail") for m in report.unplaced)
            assert count_key(body, "prompt_cache_breakpoint") == len(report.placed) == len(prompt.breakpoints) - len(report.unplaced)
            assert all(isinstance(m["content"], (list, type(None))) for m in body["messages"])
    else:
        assert keys == {None}
        assert all("max_tokens" in b for b in bodies)
        assert all(count_key(b, "prompt_cache_breakpoint") == 0 for b in bodies)
    # Tool-call arguments are re-sent as the exact strings the model streamed.
    last = bodies[-1]["messages"]
    sent = [c["function"]["arguments"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    expected = [args for k in range(1, TURNS + 1) for _, args in _arguments(k)]
    assert sent == expected
    assert all(b["stream"] is True and b["stream_options"] == {"include_usage": True} for b in bodies)
    assert len(ledger.calls(session_id=session.id)) == TURNS + 1


def reasoning_reply(prefix: str):
    """`scripted_reply`, with an encrypted reasoning item first in every odd turn's output."""
    base = scripted_reply(prefix)
    count = {"n": 0}

    def reply(record: Recorded) -> Reply:
        count["n"] += 1
        k = count["n"]
        answer = base(record)
        if k <= TURNS and k % 2:
            answer = replace(answer, reasoning=f"plan {k}", reasoning_encrypted=f"enc-{k}")
        return answer

    return reply


@pytest.mark.parametrize("family", ["openai_implicit", "openai_breakpoints"])
def test_openai_responses_adapter_wire_invariant(fake_server, workspace, ledger, family):
    fake_server.default = reasoning_reply("call")
    base = fake_server.url + "/v1"
    model = "gpt-5.6" if family == "openai_breakpoints" else "gpt-5.4"
    spec = parse_model_spec(f"openai-responses/{model}", env={"OPENAI_BASE_URL": base})
    # OpenAI's own quirks (prompt_cache_key) although the server is on 127.0.0.1.
    quirks = Quirks(usage_dialect="openai", send_prompt_cache_key=True, max_tokens_field="max_completion_tokens")
    spec = spec.model_copy(update={"quirks": quirks})
    rules, _ = rules_for(spec)
    assert rules.family == family
    backend = Capture(OpenAIResponsesBackend(model=spec.model, api_key="k", base_url=base, quirks=quirks))
    session = run_session(Route(spec=spec, backend=backend, rules=rules, explain_rules=rules), workspace, ledger)

    raw = [r for r in fake_server.requests if r.path == "/v1/responses"]
    bodies = [json.loads(r.body) for r in raw]
    assert len(bodies) == TURNS + 1
    for n in range(1, len(bodies)):
        prev, cur = bodies[n - 1], bodies[n]
        for key in ("tools", "instructions"):
            # Byte-identical, and the bytes compared are the ones actually sent.
            assert dumps(cur[key]) == dumps(prev[key]), f"request {n}: {key} changed"
            assert dumps(cur[key]) in raw[n].body
        assert len(cur["input"]) > len(prev["input"])
        for i, (a, b) in enumerate(zip(prev["input"], cur["input"])):
            key = "prompt_cache_breakpoint"
            assert dumps(strip_marks(a, key)) == dumps(strip_marks(b, key)), f"request {n}: input item {i} changed"
    # Stateless: nothing kept server-side, nothing referred to by id.
    for body in bodies:
        assert body["store"] is False and body["stream"] is True and "previous_response_id" not in body
        assert body["include"] == ["reasoning.encrypted_content"]
        assert all("id" not in item for item in body["input"])
        assert body["max_output_tokens"] > 0
    assert {b["prompt_cache_key"] for b in bodies} == {backend.calls[0][0].prompt_cache_key}
    assert [t["name"] for t in bodies[0]["tools"]] == sorted(t["name"] for t in bodies[0]["tools"])
    assert bodies[0]["instructions"].startswith(backend.calls[0][0].system)

    last = bodies[-1]["input"]
    calls = [item for item in last if item["type"] == "function_call"]
    assert [c["arguments"] for c in calls] == [args for k in range(1, TURNS + 1) for _, args in _arguments(k)]
    outputs = [item for item in last if item["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]
    reasoning = [item for item in last if item["type"] == "reasoning"]
    assert [r["encrypted_content"] for r in reasoning] == [f"enc-{k}" for k in range(1, TURNS + 1, 2)]
    # Each reasoning item comes back where the model produced it: right before that turn's output.
    first = last.index(reasoning[0])
    assert last[first + 1]["role"] == "assistant" and last[first + 2]["call_id"] == "call_1_0"

    for body, (prompt, report) in zip(bodies, backend.calls):
        if family == "openai_breakpoints":
            assert prompt.breakpoints and report.placed
            # `instructions` and tool definitions are no content parts: the head mark cannot be sent.
            assert all(m.kind in ("tools", "system", "docs") for m in report.unplaced)
            assert count_key(body, "prompt_cache_breakpoint") == len(report.placed)
            users = [i for i in body["input"] if i.get("role") == "user" or i["type"] == "function_call_output"]
            assert all(isinstance(i.get("content", i.get("output")), list) for i in users)
        else:
            assert count_key(body, "prompt_cache_breakpoint") == 0
            assert all(isinstance(i["content"], str) for i in body["input"] if i.get("role") == "user")
    rows = ledger.calls(session_id=session.id)
    assert len(rows) == TURNS + 1 and {r.backend for r in rows} == {"openai-responses"}
