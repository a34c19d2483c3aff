"""`openai/gpt-5.6` and later default to the Responses API, which keeps reasoning across tool calls
(encrypted reasoning items sent back); `openai-chat/<model>` keeps Chat Completions."""

from __future__ import annotations

import pytest
import typer
from fake_llm_server import Reply
from typer.testing import CliRunner

from hitrate.harness.commands import run as cli_run
from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import Router
from hitrate.harness.wire.openai_chat import OpenAIChatBackend
from hitrate.harness.wire.openai_responses import OpenAIResponsesBackend


@pytest.mark.parametrize(("spec", "wire"), [
    ("openai/gpt-5.6", "openai_responses"),
    ("openai/gpt-5.6-luna", "openai_responses"),
    ("openai/gpt-6-sol", "openai_responses"),
    ("openai/gpt-6.1-sol", "openai_responses"),
    ("gpt", "openai_responses"),
    ("openai/gpt-5.5", "openai_chat"),
    ("openai/gpt-5.4-mini", "openai_chat"),
    ("openai/gpt-4.1", "openai_chat"),
    ("openai/o3", "openai_chat"),
    ("openai/ft:gpt-5.6:org::abc", "openai_chat"),
    ("openai-chat/gpt-5.6", "openai_chat"),
    ("openai-responses/gpt-4.1", "openai_responses"),
])
def test_the_wire_an_openai_spec_gets(spec, wire):
    parsed = parse_model_spec(spec, {})
    assert parsed.wire == wire
    assert parsed.api_key_env == "OPENAI_API_KEY" and parsed.base_url == "https://api.openai.com/v1"
    assert parsed.quirks.send_prompt_cache_key  # OpenAI's own API on both wires


def test_router_builds_the_backend_of_that_wire():
    router = Router({"OPENAI_API_KEY": "k"}, preflight=False)
    assert isinstance(router.resolve("openai/gpt-5.6").backend, OpenAIResponsesBackend)
    assert isinstance(router.resolve("openai-chat/gpt-5.6").backend, OpenAIChatBackend)
    assert router.resolve("openai/gpt-5.6").label == "openai/gpt-5.6"


def test_a_run_on_openai_gpt_5_6_keeps_reasoning_across_tool_calls(fake_server, workspace, tmp_path):
    app = typer.Typer()
    cli_run.register(app)
    fake_server.push(
        Reply(reasoning="Read calc.py first.", reasoning_encrypted="gAAAAB-opaque==",
              tool_calls=[("call_1", "read_file", '{"path": "calc.py"}')]),
        Reply(text="It subtracts."),
    )
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake_server.url + "/v1", "HITRATE_CONFIG": str(tmp_path / "none.toml")}
    result = CliRunner().invoke(app, ["run", "What does add do?", "--model", "openai/gpt-5.6", "--effort", "high",
                                      "--workspace", str(workspace), "--db", str(tmp_path / "l.db")], env=env)
    assert result.exit_code == 0, result.output
    first, second = fake_server.bodies("/responses")
    assert first["reasoning"] == {"effort": "high", "summary": "auto"} and first["include"] == ["reasoning.encrypted_content"]
    reasoning = [item for item in second["input"] if item.get("type") == "reasoning"]
    assert reasoning == [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "Read calc.py first."}],
                          "encrypted_content": "gAAAAB-opaque=="}]
    # A resumed session sends the same encrypted item back, byte for byte.
    from hitrate.store.ledger import Ledger

    with Ledger(tmp_path / "l.db") as ledger:
        session_id = ledger.calls()[0].session_id
    fake_server.push(Reply(text="Done."))
    result = CliRunner().invoke(app, ["run", "And now?", "--resume", session_id, "--db", str(tmp_path / "l.db")], env=env)
    assert result.exit_code == 0, result.output
    third = fake_server.requests[-1]
    assert [i for i in third.json()["input"] if i.get("type") == "reasoning"] == reasoning
    assert third.json()["model"] == "gpt-5.6" and third.path == "/v1/responses"
    assert third.json()["reasoning"] == {"effort": "high", "summary": "auto"}  # the stored effort goes on
