"""End to end against the bundled engine server: both real SDKs over HTTP on 127.0.0.1, a tiny
random model built offline, the real projection, session and ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.engine.tiny import build_tiny_model
from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.local_backend import LocalEngineServer
from hitrate.harness.models import parse_model_spec
from hitrate.harness.policy import RecordedToolCall, RecordedTurn, ReplayPolicy
from hitrate.harness.router import Route, Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.projection.caching import CacheRules

TURNS = [
    RecordedTurn(text="Looking.", tool_calls=[RecordedToolCall(name="list_dir", arguments={})]),
    RecordedTurn(tool_calls=[RecordedToolCall(name="read_file", arguments={"path": "calc.py"})]),
    RecordedTurn(text="Done."),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("harness-tiny"), "llama", vocab_size=512, hidden=32,
                            layers=2, heads=2, kv_heads=1, max_positions=32768, seed=0)


def run_replay(route: Route, workspace, ledger) -> Session:
    session = Session(route, workspace, ledger=ledger, sink=EventList(),
                      config=SessionConfig(max_output_tokens=8), context=lambda: {"date": "2026-01-02"})
    result = Agent(session, policy=ReplayPolicy(TURNS), limits=AgentLimits(max_steps=5)).run("Check calc.py")
    assert result.status == "end_turn", result.detail
    return session


@pytest.mark.slow
def test_local_route_uses_the_anthropic_adapter_with_exact_cache_usage(tiny_model, workspace, ledger):
    route = Router(env={}).resolve(f"local/{tiny_model}")
    try:
        assert route.backend.wire == "anthropic_messages" and route.local is not None
        assert route.backend.base_url.startswith("http://127.0.0.1:")
        session = run_replay(route, workspace, ledger)
    finally:
        route.close()
    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 3 and all(r.error is None for r in rows)
    assert all(r.backend == "local" and r.model == str(tiny_model) for r in rows)
    first, second, third = (r.usage for r in rows)
    # Every bucket is known (the engine reports them all), and they add up to the prompt.
    assert all(u.fully_classified for u in (first, second, third))
    assert first.cache_read == 0 and first.cache_write_5m > 0  # the head mark pinned (written)
    # Later calls read at least the whole previous prompt from the engine's prefix cache.
    assert second.cache_read >= first.prompt_tokens - 1
    assert third.cache_read >= second.prompt_tokens - 1
    assert [r.miss_reason for r in rows] == ["cold", None, None]
    assert rows[0].raw_usage["cache_creation"]["ephemeral_5m_input_tokens"] == first.cache_write_5m


@pytest.mark.slow
def test_openai_adapter_against_the_engine_server(tiny_model, workspace, ledger):
    server = LocalEngineServer(str(tiny_model))
    url = server.start()
    try:
        spec = parse_model_spec(f"openai-compat/{tiny_model}@{url}/v1", env={})
        rules = CacheRules(family="openai_compat")
        backend = OpenAIChatBackend(model=str(tiny_model), api_key="unused", base_url=f"{url}/v1", quirks=spec.quirks)
        session = run_replay(Route(spec=spec, backend=backend, rules=rules, explain_rules=rules), workspace, ledger)
        backend.close()
    finally:
        server.stop()
    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 3
    first, second, third = (r.usage for r in rows)
    assert first.cache_read == 0 and first.fresh_input == first.prompt_total
    assert second.cache_read >= first.prompt_total - 1 and second.fresh_input == second.prompt_total - second.cache_read
    assert third.cache_read >= second.prompt_total - 1
    assert all(r.raw_usage["prompt_tokens_details"]["cached_tokens"] == r.usage.cache_read for r in rows)
    assert [r.miss_reason for r in rows] == ["cold", None, None]


@pytest.mark.slow
def test_local_backend_caps_max_tokens_to_the_context_window(tmp_path):
    import httpx

    small = build_tiny_model(tmp_path / "small", "llama", vocab_size=512, hidden=32, layers=2, heads=2, kv_heads=1,
                             max_positions=96, seed=0)
    server = LocalEngineServer(str(small))
    try:
        url = server.start()
        # As the harness sends it: a fixed --max-output-tokens far beyond the 96-token window.
        body = {"model": str(small), "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{url}/v1/messages", json=body, headers={"x-api-key": "local"}, timeout=60)
    finally:
        server.stop()
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    assert usage["output_tokens"] >= 1
    assert usage["input_tokens"] + usage.get("cache_read_input_tokens", 0) + usage.get("cache_creation_input_tokens", 0) + usage["output_tokens"] <= 96
