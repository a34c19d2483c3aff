"""`hitrate tui` on the command line: registration and the errors that stop it before the app."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from tui_helpers import SPEC, fixed_context
from scripted_model import ScriptedRouter
from typer.testing import CliRunner

from hitrate.harness.cli import _register_all, app
from hitrate.store.ledger import Ledger
from hitrate.tui.app import HitrateApp
from hitrate.tui.harness_link import HarnessLink


def registered():
    _register_all(app)
    return app


def test_tui_is_a_hitrate_command():
    result = CliRunner().invoke(registered(), ["tui", "--help"])
    assert result.exit_code == 0
    for option in ("--model", "--workspace", "--db", "--resume", "--approve", "--no-keepalive", "--permissions"):
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


def test_resume_of_an_unknown_session_is_reported_before_choosing_a_model(tmp_path, monkeypatch):
    # No model given and none configured: the unknown session, not the missing model, is the error.
    for var in ("HITRATE_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    db = tmp_path / "l.db"
    Ledger(db).close()
    result = CliRunner().invoke(registered(), ["tui", "--db", str(db), "-w", str(tmp_path), "--resume", "nope"])
    assert result.exit_code == 2
    assert "no such session" in result.output and "no model" not in result.output
    result = CliRunner().invoke(registered(), ["tui", "--db", str(tmp_path / "absent.db"), "--resume", "nope"])
    assert result.exit_code == 2 and "there is no ledger at" in result.output


def _recorded_session(ledger_path: Path, workspace: Path) -> str:
    link = HarnessLink(SPEC, workspace, ledger_path, router=ScriptedRouter({SPEC: [{"text": "Earlier answer."}]}),
                       context=fixed_context)
    try:
        link.run_turn("earlier question", lambda _msg: None, threading.Event(), lambda _name, _args: True)
        return link.session_id
    finally:
        link.close()


def _resumed_workspace(monkeypatch, args: list[str]) -> Path:
    seen: list[Path] = []
    # The interactive loop is the one part left out: the resume itself runs for real.
    monkeypatch.setattr(HitrateApp, "run", lambda self: seen.append(self.link.workspace))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        result = CliRunner().invoke(registered(), ["tui", "--model", f"openai-compat/m@http://127.0.0.1:{port}/v1", *args])
    assert result.exit_code == 0, result.output
    return seen[0]


def test_resume_from_another_folder_continues_in_the_sessions_workspace(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = tmp_path / "l.db"
    session_id = _recorded_session(db, project)
    monkeypatch.chdir(elsewhere)
    assert _resumed_workspace(monkeypatch, ["--db", str(db), "--resume", session_id]) == project.resolve()
    # An explicit --workspace still wins.
    assert _resumed_workspace(monkeypatch, ["--db", str(db), "--resume", session_id, "-w", str(elsewhere)]) == elsewhere.resolve()


def test_permissions_flag_and_config_rules_reach_the_app(tmp_path, monkeypatch):
    import os

    config = Path(os.environ["HITRATE_CONFIG"])
    runner = CliRunner()
    result = runner.invoke(registered(), ["tui", "--permissions", "maybe", "-w", str(tmp_path)])
    assert result.exit_code == 2 and "--permissions must be ask, allow or deny" in result.output
    config.write_text("[permissions]\nallow = ['Bash(ls)']\n")
    result = runner.invoke(registered(), ["tui", "-w", str(tmp_path)])
    assert result.exit_code == 2 and "'Bash(ls)' is not understood" in result.output

    config.write_text("[permissions]\nallow = ['shell(git status:*)']\n")
    seen = []
    monkeypatch.setattr(HitrateApp, "run", lambda self: seen.append((self.permissions, self.checkpoints)))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        result = runner.invoke(registered(), ["tui", "--model", f"openai-compat/m@http://127.0.0.1:{port}/v1",
                                              "--db", str(tmp_path / "l.db"), "-w", str(tmp_path), "--permissions", "deny"])
    assert result.exit_code == 0, result.output
    permissions, checkpoints = seen[0]
    assert permissions.decide("shell", {"command": "git status"})[0] == "allow"
    assert permissions.decide("edit_file", {"path": "a"}) == ("deny", None)  # the flag's default
    assert checkpoints is not None and checkpoints.workspace == tmp_path.resolve()


_REJECTED = """
import sys
from hitrate.harness.cli import main
sys.argv = ["hitrate", "tui", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    code = exit.code
heavy = ("hitrate.harness.router", "hitrate.harness.session", "textual", "anthropic", "openai", "hitrate.tui.app")
print(code, [name for name in heavy if name in sys.modules])
"""


def test_bad_input_is_refused_before_the_heavy_modules_load(tmp_path):
    """A misspelt model, a missing key or a missing folder is refused from the spec's text and the
    environment: the router, the provider SDKs and Textual are never imported (seconds of CPU)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["HITRATE_CONFIG"] = str(tmp_path / "none.toml")
    for args, message in ((["-m", "gpt-4"], "has no provider"),
                          (["-m", "anthropic/claude-sonnet-4-6", "-w", str(tmp_path)], "ANTHROPIC_API_KEY"),
                          (["-m", "openai-compat/m@http://127.0.0.1:9/v1", "-w", str(tmp_path / "missing")], "is not a directory")):
        done = subprocess.run([sys.executable, "-c", _REJECTED, *args], capture_output=True, text=True, env=env, timeout=120)
        assert message in done.stderr, (args, done.stderr)
        assert done.stdout.strip() == "2 []", (args, done.stdout)
