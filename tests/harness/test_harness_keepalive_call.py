"""The keep-alive warm-up on the wire and in the ledger: the real SDKs against the recording server on
127.0.0.1 receive exactly the last request's body again (same bytes, same cache marks, same routing
key) with only the output budget changed; the call is recorded as kind "keepalive"; the transcript
does not change; the next request is explained against the warm-up."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fake_llm_server import Failure, Reply
from scripted_model import ScriptedModel

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import CallRecorded, EventList
from hitrate.harness.keepalive import CacheWarmer, KeepAliveConfig, warm_context
from hitrate.harness.models import Quirks, parse_model_spec
from hitrate.harness.router import Route, rules_for
from hitrate.harness.session import Session
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.harness.wire.openai_responses import OpenAIResponsesBackend
from hitrate.harness.wire.types import CallError

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)
LIMITS = AgentLimits(show_budget=False)
WROTE = {"input_tokens": 12, "cache_creation_input_tokens": 3_000, "cache_read_input_tokens": 0, "output_tokens": 20}
READ = {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3_000, "output_tokens": 0}
OPENAI_QUIRKS = Quirks(usage_dialect="openai", send_prompt_cache_key=True, max_tokens_field="max_completion_tokens")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def context() -> dict[str, str]:
    return {"date": "2026-05-04", "workspace": "ws"}


def anthropic_route(fake_server) -> Route:
    spec = parse_model_spec("anthropic/claude-sonnet-4-6", env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url})
    rules, _ = rules_for(spec)
    rules = rules.model_copy(update={"min_cacheable_tokens": 64})  # marks on this short conversation
    backend = AnthropicBackend(model=spec.model, api_key="k", base_url=fake_server.url)
    return Route(spec=spec, backend=backend, rules=rules, explain_rules=rules)


def openai_route(fake_server, wire: str, model: str) -> Route:
    base = fake_server.url + "/v1"
    prefix = "openai-responses" if wire == "responses" else "openai"
    spec = parse_model_spec(f"{prefix}/{model}", env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": base})
    spec = spec.model_copy(update={"quirks": OPENAI_QUIRKS})  # OpenAI's own quirks although on 127.0.0.1
    rules, _ = rules_for(spec)
    cls = OpenAIResponsesBackend if wire == "responses" else OpenAIChatBackend
    return Route(spec=spec, backend=cls(model=model, api_key="k", base_url=base, quirks=OPENAI_QUIRKS), rules=rules,
                 explain_rules=rules)


def open_session(route: Route, workspace, ledger, clock: Clock, events: EventList | None = None) -> Session:
    return Session(route, workspace, ledger=ledger, sink=events if events is not None else EventList(), context=context,
                   clock=clock, sleep=lambda s: None)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def count_key(value: Any, key: str) -> int:
    if isinstance(value, dict):
        return (key in value) + sum(count_key(v, key) for v in value.values())
    if isinstance(value, list):
        return sum(count_key(v, key) for v in value)
    return 0


def test_anthropic_warm_up_resends_the_last_request_exactly_and_generates_nothing(fake_server, workspace, ledger):
    clock, events = Clock(), EventList()
    session = open_session(anthropic_route(fake_server), workspace, ledger, clock, events)
    fake_server.push(Reply(text="It subtracts.", usage=WROTE))
    Agent(session, limits=LIMITS).run("What does add do?")
    transcript = session.transcript
    stored = [(m.seq, m.kind, m.body) for m in ledger.messages(session.id)]

    clock.advance(270)
    fake_server.push(Reply(text="ignored", usage=READ))
    record = session.warm_up()

    last, warm = fake_server.requests[-2], fake_server.requests[-1]
    sent, again = last.json(), warm.json()
    # max_tokens 0 pre-warms without generating, and the API refuses it on a stream.
    assert sent["stream"] is True and "stream" not in again and again["max_tokens"] == 0
    assert dumps(without(again, "max_tokens")) == dumps(without(sent, "max_tokens", "stream"))
    for key in ("tools", "system", "messages"):
        assert dumps(again[key]).encode() in warm.body  # the very bytes, not only equal JSON
    assert count_key(again, "cache_control") == count_key(sent, "cache_control") >= 2

    assert record.kind == "keepalive" and record.error is None and record.miss_reason is None
    assert record.usage.cache_read == 3_000 and record.usage.output == 0
    assert record.cost_usd == pytest.approx((3_000 * 0.30 + 12 * 3.0) / 1e6)
    assert [r.kind for r in ledger.calls(session_id=session.id)] == [None, "keepalive"]
    assert {g.key: g.totals.calls for g in ledger.summarize("kind")} == {None: 1, "keepalive": 1}
    # The conversation is untouched, in memory and in the ledger.
    assert session.transcript == transcript
    assert [(m.seq, m.kind, m.body) for m in ledger.messages(session.id)] == stored
    announced = events.of(CallRecorded)[-1]
    assert announced.kind == "keepalive" and announced.step == 0 and announced.started_at == clock.now
    assert session.last_request is not None and session.last_request.started_at == clock.now

    # 470 s after the request but 200 s after the warm-up: the next request reads, and is a hit.
    clock.advance(200)
    fake_server.push(Reply(text="Fixed.", usage={**READ, "output_tokens": 5}))
    Agent(session, limits=LIMITS).run("Fix it.")
    assert ledger.calls(session_id=session.id)[-1].miss_reason is None


def test_a_server_that_refuses_max_tokens_0_gets_one_streamed_token(fake_server, workspace, ledger):
    clock = Clock()
    route = anthropic_route(fake_server)
    session = open_session(route, workspace, ledger, clock)
    fake_server.push(Reply(text="It subtracts.", usage=WROTE))
    Agent(session, limits=LIMITS).run("What does add do?")
    clock.advance(270)
    refusal = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: must be at least 1"}}
    fake_server.push(Failure(400, refusal), Reply(text="x", usage={**READ, "output_tokens": 1}))
    record = session.warm_up()
    refused, streamed = fake_server.requests[-2].json(), fake_server.requests[-1].json()
    assert refused["max_tokens"] == 0 and streamed["max_tokens"] == 1 and streamed["stream"] is True
    assert without(streamed, "max_tokens", "stream") == without(refused, "max_tokens")
    assert route.backend.prewarm_refused and record.usage.output == 1 and record.error is None
    # From then on, straight to the streamed token.
    clock.advance(270)
    fake_server.push(Reply(text="x", usage={**READ, "output_tokens": 1}))
    session.warm_up()
    assert fake_server.requests[-1].json()["max_tokens"] == 1


@pytest.mark.parametrize(("wire", "model", "path", "field", "budget"), [
    ("chat", "gpt-5.4", "/v1/chat/completions", "max_completion_tokens", 1),
    # The Responses API refuses max_output_tokens below 16.
    ("responses", "gpt-5.6", "/v1/responses", "max_output_tokens", 16),
])
def test_openai_warm_up_keeps_the_body_and_routing_key(fake_server, workspace, ledger, wire, model, path, field, budget):
    clock = Clock()
    session = open_session(openai_route(fake_server, wire, model), workspace, ledger, clock)
    fake_server.push(Reply(text="It subtracts."))
    Agent(session, limits=LIMITS).run("What does add do?")
    clock.advance(270)
    fake_server.push(Reply(text="I"))
    record = session.warm_up()
    sent, again = (r.json() for r in fake_server.requests[-2:])
    assert all(r.path == path for r in fake_server.requests)
    assert again[field] == budget and sent[field] == session.max_output_tokens == 32_000  # a model that thinks by default
    assert dumps(without(again, field)) == dumps(without(sent, field))
    assert again["prompt_cache_key"] == sent["prompt_cache_key"] == session.last_request.prompt.prompt_cache_key is not None
    assert record.kind == "keepalive"


def test_a_failed_warm_up_is_recorded_and_blocks_the_next_one(fake_server, workspace, ledger):
    clock = Clock()
    session = open_session(anthropic_route(fake_server), workspace, ledger, clock)
    with pytest.raises(ValueError, match="no request has returned"):
        session.warm_up()
    fake_server.push(Reply(text="It subtracts.", usage=WROTE))
    Agent(session, limits=LIMITS).run("What does add do?")
    transcript = session.transcript
    clock.advance(270)
    fake_server.push(Failure(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    with pytest.raises(CallError):
        session.warm_up()
    failed = ledger.calls(session_id=session.id)[-1]
    assert failed.kind == "keepalive" and failed.error and failed.usage.cache_read is None
    assert session.transcript == transcript and session.last_request.started_at == T0  # nothing was refreshed
    decision = CacheWarmer(KeepAliveConfig(return_probability=1.0, min_net_saving_usd=0)).decision(session, clock.now)
    assert decision.action == "skip" and "the last warm-up failed" in decision.reason


def test_a_resumed_session_knows_its_warm_ups(fake_server, workspace, ledger):
    clock = Clock()
    route = anthropic_route(fake_server)
    session = open_session(route, workspace, ledger, clock)
    fake_server.push(Reply(text="It subtracts.", usage=WROTE))
    Agent(session, limits=LIMITS).run("What does add do?")
    clock.advance(270)
    fake_server.push(Reply(usage=READ))
    session.warm_up()

    resumed = Session.resume(ledger, session.id, anthropic_route(fake_server), context=context, clock=clock,
                             sleep=lambda s: None)
    assert resumed.last_request is not None and resumed.last_request.started_at == clock.now
    seen = warm_context(resumed)
    assert seen.warmups_since == 1 and seen.warmups_total == 1 and seen.sent_at == T0 and seen.refreshed_at == clock.now
    assert seen.prompt is not None and seen.prompt.section_hashes() == session.last_request.prompt.section_hashes()
    clock.advance(270)
    fake_server.push(Reply(usage=READ))
    assert resumed.warm_up().kind == "keepalive"
    assert [json.loads(r.body)["messages"] for r in fake_server.requests[-2:]] == [
        fake_server.requests[0].json()["messages"]
    ] * 2


@pytest.mark.parametrize("spec", ["local/tiny-model", "deepseek/deepseek-flash", "openai-compat/qwen@http://127.0.0.1:9/v1"])
def test_backends_without_a_ttl_are_never_warmed(workspace, ledger, spec):
    parsed = parse_model_spec(spec, env={"DEEPSEEK_API_KEY": "k"})
    rules, explain = rules_for(parsed)
    route = Route(spec=parsed, backend=ScriptedModel([{"text": "It subtracts."}], parsed.model), rules=rules, explain_rules=explain)
    clock = Clock()
    session = open_session(route, workspace, ledger, clock)
    Agent(session, limits=LIMITS).run("What does add do?")
    warmer = CacheWarmer(KeepAliveConfig(return_probability=1.0, min_net_saving_usd=0))
    for seconds in (100, 170, 3000):
        clock.advance(seconds)
        decision = warmer.decision(session, clock.now)
        assert decision.action == "skip" and ("memory pressure" in decision.reason or "hours to days" in decision.reason)
