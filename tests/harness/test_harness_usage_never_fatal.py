"""A call is never lost to its usage: random usage payloads (missing, null, zero, wrong-typed and
contradictory fields) go through the real SDKs over HTTP to a fake server on 127.0.0.1, through
each adapter and the agent loop into the ledger. No exception escapes, the run ends normally, and
the row keeps the raw payload, the best reading of the buckets and the flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer, Reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from usage_payloads import ANTHROPIC, DEEPSEEK, OPENAI_CHAT, OPENAI_RESPONSES, payload

from hitrate.harness.agent import Agent
from hitrate.harness.models import Quirks, parse_model_spec
from hitrate.harness.router import Route
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.wire_anthropic import AnthropicBackend
from hitrate.harness.wire_openai_chat import OpenAIChatBackend
from hitrate.harness.wire_openai_responses import OpenAIResponsesBackend
from hitrate.projection.caching import CacheRules
from hitrate.store.ledger import Ledger
from hitrate.store.normalize import from_anthropic

# The SDKs warn while serialising the wrong-typed fields these tests send on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
CALL_PATH = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def server():
    fake = FakeLLMServer().start()
    yield fake
    fake.stop()


def _run(route: Route, workspace: Path, ledger_path: Path):
    with Ledger(ledger_path) as ledger:
        session = Session(route, workspace, ledger=ledger, context=lambda: {"date": "2026-01-02"},
                          config=SessionConfig(), sleep=lambda s: None)
        result = Agent(session).run("Say hello.")
        rows = ledger.calls(session_id=session.id)
    route.backend.close()
    return result, rows


def _route(spec: str, backend: Any, family: str) -> Route:
    rules = CacheRules(family=family)
    return Route(spec=parse_model_spec(spec, env={}), backend=backend, rules=rules, explain_rules=rules)


def _check(result, rows) -> None:
    assert result.status == "end_turn"
    assert len(rows) == 1 and rows[0].error is None


@CALL_PATH
@given(start=payload(ANTHROPIC), delta=st.one_of(payload(ANTHROPIC), st.just({"output_tokens": 7})))
def test_anthropic_stream_usage_never_fails_the_call(server, tmp_path_factory, start, delta) -> None:
    server.push(Reply(text="Hello.", usage=start, delta_usage=delta))
    backend = AnthropicBackend(model="claude-opus-5", api_key="k", base_url=server.url)
    result, rows = _run(_route("anthropic/claude-opus-5", backend, "anthropic"), tmp_path_factory.mktemp("ws"),
                        tmp_path_factory.mktemp("db") / "l.db")
    _check(result, rows)
    # The row keeps what the SDK handed over (it coerces some wrong-typed values on its own), and
    # its buckets are the store's reading of exactly that.
    row = rows[0]
    # (Null fields say nothing: the merge drops them, as the SDK's own accumulator does.)
    sent = any(isinstance(u, dict) and any(v is not None for v in u.values()) for u in (start, delta))
    if sent:
        assert row.raw_usage
    if row.raw_usage:
        assert row.usage == from_anthropic(row.raw_usage)
    else:
        assert row.usage.flag_codes() == ["usage_missing"]


@CALL_PATH
@given(usage=payload(OPENAI_CHAT), dialect=st.sampled_from(["openai", "gemini_openai", "openai_compat"]),
       model=st.sampled_from(["gpt-5.5", "gpt-5.6", "gemini-3.5-flash", "qwen"]))
def test_openai_chat_usage_never_fails_the_call(server, tmp_path_factory, usage, dialect, model) -> None:
    server.push(Reply(text="Hello.", usage=usage))
    backend = OpenAIChatBackend(model=model, api_key="k", base_url=server.url + "/v1", quirks=Quirks(usage_dialect=dialect))
    result, rows = _run(_route(f"openai-compat/{model}@{server.url}/v1", backend, "openai_compat"),
                        tmp_path_factory.mktemp("ws"), tmp_path_factory.mktemp("db") / "l.db")
    _check(result, rows)
    if isinstance(usage, dict) and usage:
        assert rows[0].raw_usage == usage


@CALL_PATH
@given(usage=payload(DEEPSEEK))
def test_deepseek_usage_never_fails_the_call(server, tmp_path_factory, usage) -> None:
    server.push(Reply(text="Hello.", usage=usage))
    backend = OpenAIChatBackend(model="deepseek-flash", api_key="k", base_url=server.url + "/v1",
                                quirks=Quirks(usage_dialect="deepseek"))
    result, rows = _run(_route(f"openai-compat/deepseek-flash@{server.url}/v1", backend, "deepseek"),
                        tmp_path_factory.mktemp("ws"), tmp_path_factory.mktemp("db") / "l.db")
    _check(result, rows)
    if isinstance(usage, dict) and usage:
        assert rows[0].raw_usage == usage


@CALL_PATH
@given(usage=payload(OPENAI_RESPONSES), model=st.sampled_from(["gpt-5.5", "gpt-5.6"]))
def test_openai_responses_usage_never_fails_the_call(server, tmp_path_factory, usage, model) -> None:
    server.push(Reply(text="Hello.", usage=usage))
    backend = OpenAIResponsesBackend(model=model, api_key="k", base_url=server.url + "/v1", quirks=Quirks(usage_dialect="openai"))
    result, rows = _run(_route(f"openai/{model}", backend, "openai_breakpoints" if model == "gpt-5.6" else "openai_implicit"),
                        tmp_path_factory.mktemp("ws"), tmp_path_factory.mktemp("db") / "l.db")
    _check(result, rows)
    if isinstance(usage, dict) and usage:
        assert rows[0].raw_usage == usage


def test_documented_web_search_stream_is_recorded_and_flag_free(fake_server, workspace, tmp_path) -> None:
    start = {"input_tokens": 2679, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 3}
    delta = {"input_tokens": 10682, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 510,
             "server_tool_use": {"web_search_requests": 1}}
    fake_server.push(Reply(text="Sunny.", usage=start, delta_usage=delta))
    backend = AnthropicBackend(model="claude-sonnet-4-6", api_key="k", base_url=fake_server.url)
    result, rows = _run(_route("anthropic/claude-sonnet-4-6", backend, "anthropic"), workspace, tmp_path / "l.db")
    _check(result, rows)
    row = rows[0]
    assert (row.usage.fresh_input, row.usage.output, row.usage.web_search_requests) == (10682, 510, 1)
    assert row.raw_usage["input_tokens"] == 10682 and not row.usage.flags
    assert row.cost_usd == pytest.approx(0.049696, abs=1e-8)


def test_write_total_beyond_the_start_split_is_billed_and_flagged(fake_server, workspace, tmp_path) -> None:
    start = {"input_tokens": 2679, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0, "output_tokens": 3,
             "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 2000}}
    delta = {"input_tokens": 10682, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 0, "output_tokens": 510}
    fake_server.push(Reply(text="Sunny.", usage=start, delta_usage=delta))
    backend = AnthropicBackend(model="claude-opus-5", api_key="k", base_url=fake_server.url)
    result, rows = _run(_route("anthropic/claude-opus-5", backend, "anthropic"), workspace, tmp_path / "l.db")
    _check(result, rows)
    row = rows[0]
    assert (row.usage.cache_write_5m, row.usage.cache_write_1h) == (3000, 2000)
    assert row.usage.flag_codes() == ["cache_write_split_short"]
    assert row.cost_usd == pytest.approx(0.05341 + 0.01875 + 0.02 + 0.01275, abs=1e-8)
