"""`--effort` on every wire, the default output budget that leaves room for thinking, and an effort
change mid-session as an epoch. Requests go through the real `anthropic` / `openai` SDKs to the
recording server on 127.0.0.1; each backend must receive its own documented parameter."""

from __future__ import annotations

import pytest
from fake_llm_server import Reply
from typer.testing import CliRunner

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.commands import run as cli_run
from hitrate.harness.models import Quirks, quirks_for_openai_base_url
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.summary import summary_lines
from hitrate.harness.wire.anthropic import AnthropicBackend
from hitrate.harness.wire.effort import EFFORT_VALUES, EffortError, default_output_tokens, parse_effort
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.harness.wire.openai_responses import OpenAIResponsesBackend
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import TextBlock, Transcript, UserMessage

import typer


def prompt(model: str):
    transcript = Transcript().append(UserMessage(content=(TextBlock(text="hello"),)))
    return Projector(CacheRules(family="anthropic")).project(model=model, tools=[], system="You help.", transcript=transcript)


def chat(server, host: str) -> OpenAIChatBackend:
    # Quirks of the named provider's host, requests sent to the recording server.
    return OpenAIChatBackend(model="m", api_key="k", base_url=server.url + "/v1", quirks=quirks_for_openai_base_url(host))


@pytest.mark.parametrize(("effort", "expected"), [("low", "low"), ("medium", "medium"), ("high", "high"), ("max", "max")])
def test_anthropic_gets_output_config_effort(fake_server, effort, expected):
    backend = AnthropicBackend(model="claude-sonnet-5", api_key="k", base_url=fake_server.url)
    backend.effort = effort
    fake_server.push(Reply(text="hi"))
    backend.call(prompt("claude-sonnet-5"), max_tokens=32_000)
    body = fake_server.bodies("/messages")[-1]
    assert body["output_config"] == {"effort": expected}
    assert "thinking" not in body  # Claude 5 thinks adaptively by default; manual budgets are refused


@pytest.mark.parametrize(("host", "effort", "field", "expected"), [
    ("https://api.openai.com/v1", "medium", "reasoning_effort", "medium"),
    ("https://api.openai.com/v1", "max", "reasoning_effort", "xhigh"),
    # DeepSeek serves medium as high (its own mapping table) and has a max.
    ("https://api.deepseek.com", "medium", "reasoning_effort", "high"),
    ("https://api.deepseek.com", "max", "reasoning_effort", "max"),
    # Gemini's OpenAI-compatible endpoint has nothing above high.
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "max", "reasoning_effort", "high"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "low", "reasoning_effort", "low"),
    ("http://127.0.0.1:8000/v1", "max", "reasoning_effort", "high"),
])
def test_chat_backends_get_their_own_effort_value(fake_server, host, effort, field, expected):
    backend = chat(fake_server, host)
    backend.effort = effort
    fake_server.push(Reply(text="hi"))
    backend.call(prompt("m"), max_tokens=100)
    assert fake_server.bodies("/chat/completions")[-1][field] == expected


def test_no_effort_sends_no_reasoning_field_anywhere(fake_server):
    for host in ("https://api.openai.com/v1", "https://api.deepseek.com", "http://127.0.0.1:8000/v1"):
        fake_server.push(Reply(text="hi"))
        chat(fake_server, host).call(prompt("m"), max_tokens=100)
        body = fake_server.bodies("/chat/completions")[-1]
        assert "reasoning_effort" not in body and "reasoning" not in body
    fake_server.push(Reply(text="hi"))
    AnthropicBackend(model="claude-sonnet-5", api_key="k", base_url=fake_server.url).call(prompt("claude-sonnet-5"), max_tokens=10)
    assert "output_config" not in fake_server.bodies("/messages")[-1]


def test_openrouter_dialect_sends_a_reasoning_object():
    from hitrate.harness.wire.openai_chat import render_chat_request

    body = render_chat_request(prompt("m"), Quirks(usage_dialect="openai_compat", effort_dialect="openrouter"),
                               max_tokens=10, effort="high")
    assert body["reasoning"] == {"effort": "high"} and "reasoning_effort" not in body


def test_responses_gets_reasoning_effort_and_summary(fake_server):
    backend = OpenAIResponsesBackend(model="gpt-5.6", api_key="k", base_url=fake_server.url + "/v1",
                                     quirks=quirks_for_openai_base_url("https://api.openai.com/v1"))
    backend.effort = "max"
    fake_server.push(Reply(text="hi"))
    backend.call(prompt("gpt-5.6"), max_tokens=100)
    body = fake_server.bodies("/responses")[-1]
    assert body["reasoning"] == {"effort": "xhigh", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    backend.reasoning_summary = "detailed"
    backend.effort = "low"
    fake_server.push(Reply(text="hi"))
    backend.call(prompt("gpt-5.6"), max_tokens=100)
    assert fake_server.bodies("/responses")[-1]["reasoning"] == {"effort": "low", "summary": "detailed"}


def test_the_bundled_engine_is_never_sent_an_effort(fake_server):
    backend = AnthropicBackend(model="tiny", api_key="local", base_url=fake_server.url, effort_dialect="none")
    backend.effort = "high"
    fake_server.push(Reply(text="hi"))
    backend.call(prompt("tiny"), max_tokens=10)
    assert "output_config" not in fake_server.bodies("/messages")[-1]


def test_the_mapping_table_covers_every_level():
    for dialect, values in EFFORT_VALUES.items():
        assert dialect == "none" or set(values) == {"low", "medium", "high", "max"}, dialect
    assert parse_effort(" High ") == "high" and parse_effort(None) is None
    with pytest.raises(EffortError, match="low, medium, high, max"):
        parse_effort("ultra")


# ------------------------------------------------------------------------------------------------
# Output budget
# ------------------------------------------------------------------------------------------------


def test_default_budget_leaves_room_for_thinking_within_the_models_limit():
    assert default_output_tokens(thinks_by_default=True, max_output_tokens=128_000) == 32_000
    assert default_output_tokens(thinks_by_default=True, max_output_tokens=20_000) == 20_000
    assert default_output_tokens(thinks_by_default=False, max_output_tokens=None) == 4_096
    assert default_output_tokens(thinks_by_default=False, max_output_tokens=2_048) == 2_048


def anthropic_route(server, model: str = "claude-sonnet-5"):
    return Router({"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url}, preflight=False).resolve(f"anthropic/{model}")


@pytest.mark.parametrize(("model", "budget"), [
    ("claude-sonnet-5", 32_000),  # thinks by default, 128K limit
    ("claude-sonnet-4-6", 4_096),  # thinks only when asked
    ("gemini-3.5-flash", 32_000),
    ("deepseek-chat", 4_096),
    ("gpt-4.1", 4_096),
    ("not-a-known-model", 4_096),
])
def test_session_budget_per_model(fake_server, workspace, ledger, model, budget):
    route = Router({"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}, preflight=False).resolve(f"anthropic/{model}")
    session = Session(route, workspace, ledger=ledger, sleep=lambda s: None)
    assert session.max_output_tokens == budget
    fake_server.push(Reply(text="ok"))
    Agent(session).run("hi")
    assert fake_server.bodies("/messages")[-1]["max_tokens"] == budget
    explicit = Session(anthropic_route(fake_server, model), workspace, ledger=ledger, config=SessionConfig(max_output_tokens=123))
    assert explicit.max_output_tokens == 123


def test_a_cut_off_names_the_flag_to_raise(fake_server, workspace, ledger):
    session = Session(anthropic_route(fake_server), workspace, ledger=ledger, sleep=lambda s: None)
    fake_server.push(Reply(text="a long", stop="max_tokens"))
    result = Agent(session).run("write it")
    assert result.status == "max_tokens"
    assert "32,000 tokens" in result.detail and "--max-output-tokens" in result.detail


# ------------------------------------------------------------------------------------------------
# Effort mid-session: an epoch with its cache cost
# ------------------------------------------------------------------------------------------------

USAGE_WRITE = {"input_tokens": 20, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 5}
USAGE_READ = {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3000, "output_tokens": 5}


def test_changing_effort_mid_session_starts_an_epoch(fake_server, workspace, ledger):
    session = Session(anthropic_route(fake_server), workspace, ledger=ledger, config=SessionConfig(effort="high"),
                      sleep=lambda s: None, context=lambda: {"date": "2026-12-01"})
    limits = AgentLimits(show_budget=False)
    fake_server.push(Reply(text="one", usage=USAGE_WRITE))
    Agent(session, limits=limits).run("first")
    session.set_effort("low")
    # The provider re-writes what a changed thinking setting invalidated.
    fake_server.push(Reply(text="two", usage=USAGE_WRITE))
    Agent(session, limits=limits).run("second")
    first, second = fake_server.bodies("/messages")
    assert first["output_config"] == {"effort": "high"} and second["output_config"] == {"effort": "low"}
    assert [e.number for e in session.epochs] == [0, 1]
    epoch = session.epochs[1]
    assert epoch.reason == "effort changed by the user: effort high -> low" and epoch.first_step == 2
    assert epoch.miss_tokens is not None and epoch.miss_tokens > 0
    # The bytes did not change, yet nothing was read: the miss is put down to the effort change.
    assert [r.miss_reason for _, r in session.records] == ["cold", "effort_changed"]
    lines = summary_lines(session.summary())
    assert any(line.startswith("epoch 1 from step 2: effort changed by the user: effort high -> low") for line in lines)
    # The same effort again changes nothing.
    session.set_effort("low")
    fake_server.push(Reply(text="three", usage=USAGE_READ))
    Agent(session, limits=limits).run("third")
    assert len(session.epochs) == 2


def test_effort_follows_a_model_switch(fake_server, workspace, ledger):
    session = Session(anthropic_route(fake_server), workspace, ledger=ledger, config=SessionConfig(effort="medium"))
    other = anthropic_route(fake_server, "claude-opus-5")
    session.switch_model(other)
    assert other.backend.effort == "medium"


# ------------------------------------------------------------------------------------------------
# The command line and the config file
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    cli_run.register(app)
    return app


def test_run_effort_flag_and_config_key(app, fake_server, workspace, tmp_path):
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "HITRATE_CONFIG": str(tmp_path / "none.toml")}
    base = ["run", "hi", "--model", "anthropic/claude-sonnet-5", "--workspace", str(workspace), "--db", str(tmp_path / "l.db")]
    fake_server.push(Reply(text="ok"))
    result = CliRunner().invoke(app, [*base, "--effort", "max"], env=env)
    assert result.exit_code == 0, result.output
    body = fake_server.bodies("/messages")[-1]
    assert body["output_config"] == {"effort": "max"} and body["max_tokens"] == 32_000

    config = tmp_path / "config.toml"
    config.write_text('effort = "low"\n')
    fake_server.push(Reply(text="ok"))
    result = CliRunner().invoke(app, base, env=dict(env, HITRATE_CONFIG=str(config)))
    assert result.exit_code == 0, result.output
    assert fake_server.bodies("/messages")[-1]["output_config"] == {"effort": "low"}

    result = CliRunner().invoke(app, [*base, "--effort", "ultra"], env=env)
    assert result.exit_code == 2 and "low, medium, high, max" in result.output
    config.write_text('effort = "extreme"\n')
    result = CliRunner().invoke(app, base, env=dict(env, HITRATE_CONFIG=str(config)))
    assert result.exit_code == 2 and "config file" in result.output


def test_a_resume_keeps_the_effort_or_starts_an_epoch_when_it_changes(fake_server, workspace, ledger):
    session = Session(anthropic_route(fake_server), workspace, ledger=ledger, config=SessionConfig(effort="high"),
                      sleep=lambda s: None)
    fake_server.push(Reply(text="one", usage=USAGE_WRITE))
    Agent(session).run("first")
    # Resumed without an effort: the stored one goes on, in the same epoch.
    kept = Session.resume(ledger, session.id, anthropic_route(fake_server), sleep=lambda s: None)
    assert kept.effort == "high"
    fake_server.push(Reply(text="two", usage=USAGE_READ))
    Agent(kept).run("second")
    assert fake_server.bodies("/messages")[-1]["output_config"] == {"effort": "high"}
    assert len(kept.epochs) == 1
    # Resumed with another effort: a new epoch, said so.
    changed = Session.resume(ledger, session.id, anthropic_route(fake_server), config=SessionConfig(effort="low"),
                             sleep=lambda s: None)
    fake_server.push(Reply(text="three", usage=USAGE_WRITE))
    Agent(changed).run("third")
    assert fake_server.bodies("/messages")[-1]["output_config"] == {"effort": "low"}
    assert [e.number for e in changed.epochs] == [0, 1]
    assert changed.epochs[1].reason == "resumed with effort low (was high): effort high -> low"
    # And the next resume reads the new effort back.
    assert Session.resume(ledger, session.id, anthropic_route(fake_server)).effort == "low"


@pytest.mark.slow
def test_the_engine_server_takes_effort_on_both_wires(tmp_path, workspace, ledger):
    """The bundled engine's models do not reason, yet a client that sends an effort (any
    Anthropic- or OpenAI-compatible tool would) is served, not refused."""
    from hitrate.engine.tiny import build_tiny_model
    from hitrate.harness.local_backend import LocalEngineServer
    from hitrate.harness.router import Route

    tiny = build_tiny_model(tmp_path / "tiny", "llama", vocab_size=512, hidden=32, layers=2, heads=2, kv_heads=1,
                            max_positions=4096, seed=0)
    server = LocalEngineServer(str(tiny))
    url = server.start()
    try:
        chat_backend = OpenAIChatBackend(model=str(tiny), api_key="unused", base_url=f"{url}/v1",
                                         quirks=quirks_for_openai_base_url(url))
        anthropic_backend = AnthropicBackend(model=str(tiny), api_key="local", base_url=url)  # effort_dialect "anthropic"
        for backend in (chat_backend, anthropic_backend):
            backend.effort = "high"
            result = backend.call(prompt(str(tiny)), max_tokens=4)
            assert result.stop_reason in ("end_turn", "max_tokens")
            sent = result.request_body
            assert sent.get("reasoning_effort") == "high" or sent.get("output_config") == {"effort": "high"}
            backend.close()
    finally:
        server.stop()
