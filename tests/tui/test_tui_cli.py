"""`hitrate tui` on the command line: registration and the errors that stop it before the app."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from hitrate.harness.cli import _register_all, app


def registered():
    _register_all(app)
    return app


def test_tui_is_a_hitrate_command():
    result = CliRunner().invoke(registered(), ["tui", "--help"])
    assert result.exit_code == 0
    for option in ("--model", "--workspace", "--db", "--resume", "--approve", "--no-keepalive"):
        assert option in result.output


def test_bad_model_spec_and_workspace_exit_with_a_message(tmp_path):
    runner = CliRunner()
    result = runner.invoke(registered(), ["tui", "--model", "nonsense", "--db", str(tmp_path / "l.db"), "-w", str(tmp_path)])
    assert result.exit_code == 2 and "has no provider" in result.output
    result = runner.invoke(registered(), ["tui", "--model", "anthropic/x", "-w", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "is not a directory" in result.output


def test_missing_key_is_reported(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = CliRunner().invoke(
        registered(), ["tui", "--model", "anthropic/claude-sonnet-4-6", "--db", str(tmp_path / "l.db"), "-w", str(tmp_path)]
    )
    assert result.exit_code == 2 and "ANTHROPIC_API_KEY" in result.output


def test_unreachable_server_is_reported(tmp_path):
    # The router checks that the server answers; a closed local port fails fast and clearly.
    result = CliRunner().invoke(
        registered(), ["tui", "--model", "openai-compat/m@http://127.0.0.1:9/v1", "--db", str(tmp_path / "l.db"), "-w", str(tmp_path)]
    )
    assert result.exit_code == 2 and "cannot reach" in result.output


def test_resume_of_an_unknown_session_is_reported(tmp_path):
    with socket.socket() as listener:  # a server that accepts connections: the preflight passes
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        result = CliRunner().invoke(
            registered(),
            ["tui", "--model", f"openai-compat/m@http://127.0.0.1:{port}/v1", "--db", str(tmp_path / "l.db"),
             "-w", str(tmp_path), "--resume", "0abc"],
        )
    assert result.exit_code == 2 and "no saved transcript for session 0abc" in result.output
