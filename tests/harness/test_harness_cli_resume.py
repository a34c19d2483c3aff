"""`hitrate run --resume <session-id> "<next instruction>"` against the recording server."""

from __future__ import annotations

import pytest
import typer
from fake_llm_server import Reply
from typer.testing import CliRunner

from hitrate.harness import cli_run
from hitrate.store.ledger import Ledger

USAGE = {"input_tokens": 30, "cache_creation_input_tokens": 1800, "cache_read_input_tokens": 0, "output_tokens": 6}


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    cli_run.register(app)
    return app


def test_resume_continues_the_session_on_its_model_and_workspace(app, fake_server, workspace, tmp_path, monkeypatch):
    fake_server.push(
        Reply(text="It subtracts.", usage=USAGE),
        Reply(text="Use a plus.", usage={**USAGE, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 1800}),
    )
    db = tmp_path / "ledger.db"
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    runner = CliRunner()
    first = runner.invoke(app, ["run", "What does add do?", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                "--db", str(db)], env=env)
    assert first.exit_code == 0, first.output
    with Ledger(db) as ledger:
        (session,) = ledger.sessions()

    # No --model, no --workspace: both come from the session; run from elsewhere to prove it.
    monkeypatch.chdir(tmp_path)
    again = runner.invoke(app, ["run", "How do I fix it?", "--resume", session.id, "--db", str(db)], env=env)
    assert again.exit_code == 0, again.output
    second = fake_server.bodies("/messages")[-1]
    said = [block["text"] for m in second["messages"] for block in m["content"] if block["type"] == "text"]
    assert said[0] == "What does add do?" and "It subtracts." in said and said[-1] == "How do I fix it?"
    with Ledger(db) as ledger:
        rows = ledger.calls(session_id=session.id)
        assert len(ledger.sessions()) == 1 and len(rows) == 2
    assert rows[1].miss_reason is None and rows[1].usage.cache_read == 1800
    # The summary is the session's: both calls.
    assert f"session {session.id}" in again.stdout and "calls: 2" in again.stdout


def test_resume_of_an_unknown_session_exits_with_a_usage_error(app, workspace, tmp_path):
    db = tmp_path / "ledger.db"
    Ledger(db).close()
    result = CliRunner().invoke(app, ["run", "next", "--resume", "0abc", "-m", "anthropic/claude-sonnet-5",
                                      "-w", str(workspace), "--db", str(db)], env={"ANTHROPIC_API_KEY": "k"})
    assert result.exit_code == cli_run.EXIT_USAGE and "no saved transcript for session 0abc" in result.stderr


def test_resume_by_prefix_and_the_picker(app, fake_server, workspace, tmp_path, monkeypatch):
    fake_server.push(Reply(text="It subtracts.", usage=USAGE), Reply(text="Plus.", usage=USAGE))
    db = tmp_path / "ledger.db"
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    runner = CliRunner()
    first = runner.invoke(app, ["run", "What does add do?", "-m", "sonnet", "-w", str(workspace), "--db", str(db)], env=env)
    assert first.exit_code == 0, first.output
    with Ledger(db) as ledger:
        (session,) = ledger.sessions()

    # `--resume` alone (the CLI passes it on as `--resume=`) lists the sessions and how to continue.
    picked = runner.invoke(app, ["run", "--resume=", "--db", str(db)], env=env)
    assert picked.exit_code == 0, picked.output
    assert session.id[:8] in picked.stderr and "What does add do?" in picked.stderr and "claude-sonnet-5" in picked.stderr
    assert "hitrate run --resume <id or its first characters>" in picked.stderr

    again = runner.invoke(app, ["run", "And now?", "--resume", session.id[:14], "--db", str(db)], env=env)
    assert again.exit_code == 0, again.output
    with Ledger(db) as ledger:
        assert len(ledger.sessions()) == 1 and len(ledger.calls(session_id=session.id)) == 2


def test_a_bare_resume_option_becomes_an_empty_value():
    from hitrate.harness.cli import bare_options_as_empty

    assert bare_options_as_empty(["hitrate", "run", "--resume"]) == ["hitrate", "run", "--resume="]
    assert bare_options_as_empty(["hitrate", "run", "--resume", "--db", "x"]) == ["hitrate", "run", "--resume=", "--db", "x"]
    assert bare_options_as_empty(["hitrate", "run", "--resume", "01ab", "go"]) == ["hitrate", "run", "--resume", "01ab", "go"]
