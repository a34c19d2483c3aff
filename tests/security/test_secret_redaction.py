"""Secrets that pass through a session (`cat .env`, a key the model repeats, a server echoing a
key, a failing test printing the environment) are stored in the ledger redacted, on by default;
what is sent to the model is never changed, and redaction can be turned off."""

from __future__ import annotations

import json
import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from fake_llm_server import FakeLLMServer, Reply  # noqa: E402

from hitrate.harness.commands import run as cli_run  # noqa: E402
from hitrate.harness.defaults import apply_redaction_config  # noqa: E402
from hitrate.store.ledger import Ledger  # noqa: E402
from hitrate.store.records import CallRecord, MessageRecord  # noqa: E402
from hitrate.store.redaction import ENV_REDACT, redact_json, redact_text  # noqa: E402

pytestmark = pytest.mark.timeout(120)

ANTHROPIC = "sk-ant-api03-" + "Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789_-" * 2 + "AbCdEfGhIjKlMnOpQrAA"
OPENAI = "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOp"
GITHUB = "ghp_" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
AWS = "AKIAIOSFODNN7EXAMPL7"
SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIzaSyA1234567890abcdefghijklmnopqrstuv"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
PEM = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----"
DOT_ENV = (
    f"ANTHROPIC_API_KEY={ANTHROPIC}\nOPENAI_API_KEY={OPENAI}\nGITHUB_TOKEN={GITHUB}\n"
    f"AWS_ACCESS_KEY_ID={AWS}\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    f"SLACK_BOT_TOKEN={SLACK}\nGOOGLE_API_KEY={GOOGLE}\nDB_PASSWORD=hunter2hunter2\n"
    "DATABASE_URL=postgres://app:pa55w0rd-xyz@db.internal:5432/app\n"
    f"SESSION_JWT={JWT}\n{PEM}\n"
)
SECRETS = [ANTHROPIC, OPENAI, GITHUB, AWS, SLACK, GOOGLE, JWT, PEM_BODY, "wJalrXUtnFEMI/K7MDENG", "hunter2hunter2", "pa55w0rd-xyz"]


def _stored_text(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT body FROM messages").fetchall() + conn.execute("SELECT error FROM calls").fetchall()
    finally:
        conn.close()
    return "\n".join(str(r[0]) for r in rows)


@pytest.fixture
def fake_server():
    server = FakeLLMServer().start()
    yield server
    server.stop()


def _run(fake_server, workspace: Path, db: Path, *extra: str):
    (workspace / ".env").write_text(DOT_ENV)
    fake_server.push(Reply(text="Reading it.", tool_calls=[("call_1", "read_file", '{"path": ".env"}')]))
    fake_server.push(Reply(text=f"Your key is {ANTHROPIC} and the DB password is DB_PASSWORD=hunter2hunter2."))
    app = typer.Typer()
    cli_run.register(app)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["run", "show me .env", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--db", str(db), "--permissions", "allow", *extra], env=env)  # fmt: skip
    assert result.exit_code == 0, result.output


def test_cat_env_and_a_key_the_model_repeats_are_stored_redacted_but_sent_verbatim(fake_server, workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ENV_REDACT, raising=False)
    db = tmp_path / "ledger.db"
    _run(fake_server, workspace, db)
    stored = _stored_text(db)
    for secret in SECRETS:
        assert secret not in stored, secret
    # detect-secrets' names where its patterns find the key (aws-access-key), hitrate's own where they
    # find it first, whole or alone.
    for rule in ("anthropic-api-key", "openai-api-key", "github-token", "aws-access-key", "google-api-key", "jwt",
                 "private-key", "assigned-secret", "basic-auth-credentials"):  # fmt: skip
        assert f"[REDACTED:{rule}]" in stored, rule
    # The second request carried the file exactly as read: the cached prefix is what the model saw.
    second = json.dumps(fake_server.bodies("/v1/messages")[1])
    assert ANTHROPIC in second and PEM_BODY in second and "hunter2hunter2" in second
    # The transcript still reads back (resume works on the redacted copy).
    from hitrate.harness.transcript_log import read_transcript

    with Ledger(db) as ledger:
        stored_transcript = read_transcript(ledger.messages(ledger.sessions()[0].id)).transcript
    assert "[REDACTED:private-key]" in stored_transcript.model_dump_json()


def test_no_redact_secrets_stores_them_verbatim(fake_server, workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ENV_REDACT, raising=False)
    db = tmp_path / "ledger.db"
    _run(fake_server, workspace, db, "--no-redact-secrets")
    assert ANTHROPIC in _stored_text(db) and "[REDACTED:" not in _stored_text(db)


def test_the_config_key_turns_redaction_off_and_the_variable_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("redact_secrets = false\n")
    env = {"HITRATE_CONFIG": str(config)}
    apply_redaction_config(env)
    assert env[ENV_REDACT] == "0"
    forced = {"HITRATE_CONFIG": str(config), ENV_REDACT: "1"}
    apply_redaction_config(forced)
    assert forced[ENV_REDACT] == "1"
    config.write_text('redact_secrets = "no"\n')
    with pytest.raises(ValueError, match="must be true or false"):
        apply_redaction_config({"HITRATE_CONFIG": str(config)})


def test_a_server_error_echoing_a_key_and_a_failing_tests_output_are_stored_redacted(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(ENV_REDACT, raising=False)
    db = tmp_path / "ledger.db"
    with Ledger(db) as ledger:
        task = ledger.start_task("t")
        ledger.record_call(CallRecord(backend="anthropic", model="m", started_at=datetime.now(timezone.utc),
                                      error=f"401: invalid x-api-key {ANTHROPIC}"))  # fmt: skip
        ledger.finish_task(task.id, "fail", detail={"output": f"E   assert env == {{'OPENAI_API_KEY': '{OPENAI}'}}"})
        assert ANTHROPIC not in ledger.calls()[0].error
        assert OPENAI not in json.dumps(ledger.get_task(task.id).detail)


@pytest.mark.parametrize("secret", SECRETS[:7])
def test_each_known_shape_is_redacted(secret: str) -> None:
    assert secret not in redact_text(f"found: {secret} (in the output)")


@pytest.mark.parametrize(
    "harmless",
    ["max_tokens=4096", "prompt_tokens: 1200", "PWD=/work/project", "password = os.environ.get('DB_PASSWORD')",
     "token = get_token()", "the password field is required", "sk-short", "tokens=12345"],
)
def test_ordinary_text_is_left_alone(harmless: str) -> None:
    assert redact_text(harmless) == harmless


def test_opaque_signatures_are_kept_byte_for_byte() -> None:
    body = json.dumps({"role": "assistant", "content": [
        {"type": "thinking", "thinking": f"the key is {GOOGLE}", "signature": f"Eo8B{GOOGLE}Cg==", "redacted": False},
        {"type": "thinking", "thinking": f"opaque{GOOGLE}", "signature": None, "redacted": True},
    ]})  # fmt: skip
    redacted = json.loads(redact_json(body))
    assert GOOGLE not in redacted["content"][0]["thinking"]
    assert redacted["content"][0]["signature"] == f"Eo8B{GOOGLE}Cg=="
    assert redacted["content"][1]["thinking"] == f"opaque{GOOGLE}"
    clean = json.dumps({"role": "user", "content": [{"type": "text", "text": "hello"}]}, indent=3)
    assert redact_json(clean) is clean  # nothing found: stored byte for byte


def test_the_ledger_redacts_by_default_and_not_when_turned_off(tmp_path: Path, monkeypatch) -> None:
    body = json.dumps({"role": "user", "content": [{"type": "text", "text": f"use {GITHUB}"}]})
    monkeypatch.delenv(ENV_REDACT, raising=False)
    with Ledger(tmp_path / "on.db") as ledger:
        ledger.append_message(MessageRecord(session_id="s", seq=0, kind="user", body=body))
        assert GITHUB not in ledger.messages("s")[0].body
    monkeypatch.setenv(ENV_REDACT, "0")
    with Ledger(tmp_path / "off.db") as ledger:
        ledger.append_message(MessageRecord(session_id="s", seq=0, kind="user", body=body))
        assert ledger.messages("s")[0].body == body


@pytest.mark.parametrize("content", [
    DOT_ENV,
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc+/=\n\"quoted\" and the file goes on",
    '{"password": "hunter2hunter2", "token": "abcd1234"}',
    f"curl -H 'Authorization: Bearer {JWT}' https://u:pa55w0rd-xyz@example.com",
])  # fmt: skip
def test_secrets_inside_a_tool_calls_json_arguments_leave_them_valid_json(content: str) -> None:
    arguments = json.dumps({"path": "notes.txt", "content": content})
    redacted = redact_text(arguments)
    assert redacted != arguments
    assert json.loads(redacted)["path"] == "notes.txt"


def test_a_session_resumed_from_a_redacted_ledger_goes_on(fake_server, workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ENV_REDACT, raising=False)
    db = tmp_path / "ledger.db"
    _run(fake_server, workspace, db)
    with Ledger(db) as ledger:
        session_id = ledger.sessions()[0].id
    fake_server.push(Reply(text="Going on."))
    app = typer.Typer()
    cli_run.register(app)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["run", "and now?", "--resume", session_id, "-w", str(workspace), "--db", str(db),
                                      "--permissions", "allow"], env=env)  # fmt: skip
    assert result.exit_code == 0, result.output
    # The resumed request re-sends what the ledger kept: the redacted text, never the secret.
    resumed = json.dumps(fake_server.bodies("/v1/messages")[-1])
    assert "[REDACTED:anthropic-api-key]" in resumed and ANTHROPIC not in resumed
