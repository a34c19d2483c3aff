"""A resumed session whose AGENTS.md changed on disk gets no 400 loop from a Claude model that binds
preserved thinking to its conversation: resume sends the head the session recorded, byte for byte,
says so, and refreshing it is the user's explicit choice.

The recording server plays such a model: it binds the conversation to the tools and system blocks
of its first request and answers any later request whose head differs with the documented 400
"block is bound to a different conversation"."""

from __future__ import annotations

import json

from fake_llm_server import Failure, FakeLLMServer, Recorded, Reply
from typer.testing import CliRunner

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig

BOUND = Failure(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                 "message": "thinking block is bound to a different conversation"}})


class BindingModel:
    """The first request's head binds the conversation; a later, different head is refused."""

    def __init__(self) -> None:
        self.head: str | None = None

    def __call__(self, record: Recorded):
        body = record.json()
        head = json.dumps([body.get("tools"), body.get("system")], sort_keys=True)
        if self.head is None:
            self.head = head
        return Reply(text="ok") if head == self.head else BOUND


def resume_and_run(ledger, session_id, env, *, refresh: bool = False):
    route = Router(env, overrides={}).resolve("anthropic/claude-sonnet-5")
    session = Session.resume(ledger, session_id, route, context=lambda: {"date": "2026-12-01"},
                             sleep=lambda s: None, refresh_head=refresh, config=SessionConfig(max_output_tokens=32))
    result = Agent(session, limits=AgentLimits(max_steps=3, show_budget=False)).run("go on")
    session.close()
    return session, result


def test_resume_with_changed_docs_keeps_the_recorded_head_and_gets_no_400(workspace, ledger):
    server = FakeLLMServer(default=BindingModel()).start()
    try:
        env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url}
        route = Router(env, overrides={}).resolve("anthropic/claude-sonnet-5")
        first = Session(route, workspace, ledger=ledger, context=lambda: {"date": "2026-12-01"}, sleep=lambda s: None)
        assert Agent(first, limits=AgentLimits(show_budget=False)).run("start").status == "end_turn"
        first.close()
        (workspace / "AGENTS.md").write_text("Always run `make check` first.\n")

        again, result = resume_and_run(ledger, first.id, env)
        assert result.status == "end_turn"
        assert "the project docs (AGENTS.md) changed" in (again.head_notice or "")
        first_body, resumed_body = server.bodies("/messages")
        assert resumed_body["system"] == first_body["system"] and resumed_body["tools"] == first_body["tools"]
        assert "make check" not in json.dumps(resumed_body["system"])

        # Control: the same resume with the current files is refused, once (a 400 is not retried).
        before = len(server.requests)
        refreshed, result = resume_and_run(ledger, first.id, env, refresh=True)
        assert result.status == "error" and result.error_status == 400
        assert len(server.requests) == before + 1
        assert "make check" in json.dumps(server.bodies("/messages")[-1]["system"])
        # The refused head was not recorded: resuming again goes on with the one the provider accepted.
        _, result = resume_and_run(ledger, first.id, env)
        assert result.status == "end_turn"
    finally:
        server.stop()


def test_run_resume_says_the_head_is_frozen(workspace, tmp_path):
    from hitrate.harness.commands import run as cli_run
    import typer

    server = FakeLLMServer(default=BindingModel()).start()
    try:
        app = typer.Typer()
        cli_run.register(app)
        app.command("noop")(lambda: None)
        env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url, "HITRATE_CONFIG": str(tmp_path / "none.toml")}
        db = str(tmp_path / "l.db")
        result = CliRunner().invoke(app, ["run", "start", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", db,
                                          "--json"], env=env)
        assert result.exit_code == 0, result.output
        session_id = next(json.loads(line)["session_id"] for line in result.stdout.splitlines() if line.startswith("{"))
        (workspace / "AGENTS.md").write_text("Changed.\n")
        result = CliRunner().invoke(app, ["run", "again", "--resume", session_id, "--db", db], env=env)
        assert result.exit_code == 0, result.output
        assert "note: the project docs (AGENTS.md) changed since this session was recorded" in result.stderr
        assert "--refresh-docs" in result.stderr
        result = CliRunner().invoke(app, ["run", "again", "--resume", session_id, "--db", db, "--refresh-docs"], env=env)
        assert result.exit_code == 1 and "bound to a different conversation" in result.output
    finally:
        server.stop()
