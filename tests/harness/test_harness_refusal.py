"""Refusals end the run with their own status and exit code, and the next prompt does not continue
from the refused turn: it is taken out of the history (Anthropic: "reset the conversation context
by removing or updating the turn that was refused"), in the stored transcript too."""

from __future__ import annotations

import typer
from fake_llm_server import RawStream, Reply
from test_harness_wire_opaque import anthropic_route, anthropic_stream, chat_route, chunk, session_for, usage_chunk
from typer.testing import CliRunner

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.commands import run as cli_run
from hitrate.harness.models import quirks_for_openai_base_url
from hitrate.harness.router import Route
from hitrate.harness.session import Session
from hitrate.harness.wire.openai_responses import OpenAIResponsesBackend
from hitrate.harness.models import parse_model_spec
from hitrate.harness.router import rules_for

LIMITS = AgentLimits(show_budget=False)
STOP_DETAILS = {"type": "refusal", "category": "cyber", "explanation": "This request was declined because it could enable cyber harm."}


def unmarked(message: dict) -> dict:
    """A message without its cache marks (they move from request to request)."""
    return dict(message, content=[{k: v for k, v in b.items() if k != "cache_control"} for b in message["content"]])


def refused_anthropic() -> RawStream:
    # platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals
    return anthropic_stream([({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Hello.."}])],
                            "refusal", STOP_DETAILS)


def test_an_anthropic_refusal_ends_the_run_and_leaves_the_history(fake_server, workspace, ledger):
    session = session_for(anthropic_route(fake_server), workspace, ledger)
    fake_server.push(Reply(text="Sure."))
    Agent(session, limits=LIMITS).run("First, something fine.")
    kept = session.transcript.messages
    fake_server.push(refused_anthropic())
    result = Agent(session, limits=LIMITS).run("Something refused.")
    assert result.status == "refused"
    assert "cyber harm" in result.detail and "taken out of the history" in result.detail
    assert session.transcript.messages == kept
    fake_server.push(Reply(text="Fine."))
    Agent(session, limits=LIMITS).run("Something else.")
    third = fake_server.bodies("/messages")[-1]
    texts = [b.get("text") for m in third["messages"] for b in m["content"] if isinstance(b, dict)]
    assert "Something refused." not in texts and "Hello.." not in texts and "Something else." in texts
    # The request after the refusal continues the history before it: its cached prefix still serves.
    first = fake_server.bodies("/messages")[0]
    assert unmarked(third["messages"][0]) == unmarked(first["messages"][0])
    assert third["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "Sure."}]}
    # A resume reads the same history back.
    resumed = Session.resume(ledger, session.id, anthropic_route(fake_server))
    assert resumed.transcript.messages == session.transcript.messages


def test_a_refusal_after_tool_rounds_takes_the_whole_run_out(fake_server, workspace, ledger):
    session = session_for(anthropic_route(fake_server), workspace, ledger)
    fake_server.push(Reply(tool_calls=[("toolu_1", "read_file", '{"path": "calc.py"}')]), refused_anthropic())
    result = Agent(session, limits=LIMITS).run("Read and do something refused.")
    assert result.status == "refused" and result.steps == 2
    assert session.transcript.messages == ()
    # Every call made is still in the ledger.
    assert len(ledger.calls()) == 2


def test_chat_refusal_field_and_content_filter_are_refusals(fake_server, workspace, ledger):
    model = "gpt-5.4"
    refusal_stream = RawStream([
        chunk(model, {"role": "assistant", "content": None, "refusal": ""}),
        chunk(model, {"refusal": "I'm sorry, I can't help with that."}),
        chunk(model, {}, "stop"),
        usage_chunk(model),
    ])
    session = session_for(chat_route(fake_server, f"openai/{model}", "https://api.openai.com/v1"), workspace, ledger)
    fake_server.push(refusal_stream)
    result = Agent(session, limits=LIMITS).run("Do it.")
    assert result.status == "refused" and session.transcript.messages == ()
    fake_server.push(Reply(text="Partial", stop="content_filter"))
    assert Agent(session, limits=LIMITS).run("Again.").status == "refused"


def test_a_responses_refusal_part_is_a_refusal(fake_server, workspace, ledger):
    parsed = parse_model_spec("openai-responses/gpt-5.6", {})
    backend = OpenAIResponsesBackend(model="gpt-5.6", api_key="k", base_url=fake_server.url + "/v1",
                                     quirks=quirks_for_openai_base_url("https://api.openai.com/v1"), label=parsed.label)
    rules, explain = rules_for(parsed)
    route = Route(spec=parsed, backend=backend, rules=rules, explain_rules=explain)
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [refusal]}
    response = {"id": "resp_1", "object": "response", "created_at": 1764000000, "model": "gpt-5.6", "status": "completed",
                "output": [item], "error": None, "incomplete_details": None, "tools": [], "parallel_tool_calls": True,
                "tool_choice": "auto",
                "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 8,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 48}}
    fake_server.push(RawStream([
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": dict(response, status="in_progress", output=[], usage=None)}),
        ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                                        "item": dict(item, status="in_progress", content=[])}),
        ("response.refusal.delta", {"type": "response.refusal.delta", "sequence_number": 2, "item_id": "msg_1",
                                    "output_index": 0, "content_index": 0, "delta": "I can't help with that."}),
        ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "sequence_number": 4, "response": response}),
    ]))
    session = Session(route, workspace, ledger=ledger, sleep=lambda s: None)
    result = Agent(session, limits=LIMITS).run("Do it.")
    assert result.status == "refused" and "refusal" in result.detail


def test_the_cli_exits_4_on_a_refusal(fake_server, workspace, tmp_path):
    app = typer.Typer()
    cli_run.register(app)
    fake_server.push(refused_anthropic())
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "HITRATE_CONFIG": str(tmp_path / "none.toml")}
    result = CliRunner().invoke(app, ["run", "Do it.", "--model", "anthropic/claude-sonnet-5", "--workspace", str(workspace),
                                      "--db", str(tmp_path / "l.db")], env=env)
    assert result.exit_code == cli_run.EXIT_REFUSED == 4, result.output
    assert "refused" in result.output and "cyber harm" in result.output
