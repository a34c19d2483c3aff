"""`hitrate run` and `hitrate lint` through the command line, against the recording server."""

from __future__ import annotations

import json

import pytest
import typer
from fake_llm_server import Failure, Reply
from typer.testing import CliRunner

from hitrate.harness.commands import run as cli_run
from hitrate.harness.cli import _HARNESS_COMMAND_MODULES, _register_all, command_help
from hitrate.store.ledger import Ledger


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    cli_run.register(app)
    return app


def test_commands_are_registered():
    assert "hitrate.harness.commands.run" in _HARNESS_COMMAND_MODULES
    # `hitrate demo` comes from evals (the suite demo); the harness keeps its one-session demo as a library.
    assert "hitrate.harness.cli_demo" not in _HARNESS_COMMAND_MODULES


def test_command_help_reflows_paragraphs_and_takes_the_first_as_summary():
    doc = """Do the thing
    in one go.

        Details wrapped
        over lines."""
    assert command_help(doc) == {
        "help": "Do the thing in one go.\n\nDetails wrapped over lines.",
        "short_help": "Do the thing in one go.",
    }


def test_every_command_has_a_one_line_summary():
    # Harness modules and the commands the components above contribute through entry points.
    app = typer.Typer()
    _register_all(app)
    names = {info.name for info in app.registered_commands}
    assert {"run", "lint", "serve", "prices", "ledger"} <= names
    assert {"eval", "report", "whatif", "ledger-merge", "demo", "tui"} <= names
    for group in app.registered_groups:
        summary = group.typer_instance.info.help
        assert summary and "\n" not in summary, group.name
    for info in app.registered_commands:
        assert info.short_help and "\n" not in info.short_help, info.name
        # A line break only between paragraphs: the terminal, not the docstring, wraps the text.
        assert info.help and all(p and "\n" not in p for p in info.help.split("\n\n")), info.name
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert "Streams the model's text and tool activity, then a summary: tokens read from cache, written, fresh" in result.output


def test_run_json_emits_one_event_per_line_and_records_calls(app, fake_server, workspace, tmp_path):
    fake_server.push(
        Reply(text="Reading.", tool_calls=[("toolu_1", "read_file", '{"path": "calc.py"}')],
              usage={"input_tokens": 1500, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20}),
        Reply(text="It subtracts.",
              usage={"input_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1500, "output_tokens": 9}),
    )
    db = tmp_path / "cli.db"
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    result = CliRunner().invoke(
        app, ["run", "What does add do?", "--model", "anthropic/claude-sonnet-5", "--workspace", str(workspace),
              "--json", "--db", str(db)], env=env,
    )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "session_started" and types[-1] == "finished"
    assert types.count("call_recorded") == 2 and "tool_call_started" in types and "tool_call_finished" in types
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "Reading.It subtracts."
    calls = [e for e in events if e["type"] == "call_recorded"]
    assert calls[1]["usage"]["cache_read"] == 1500 and calls[1]["cost_usd"] > 0
    summary = events[-1]["summary"]
    assert summary["calls"] == 2 and summary["totals"]["cache_read"] == 1500
    with Ledger(db) as ledger:
        rows = ledger.calls()
    assert len(rows) == 2 and rows[0].price_snapshot_id and rows[1].cost_usd == calls[1]["cost_usd"]


def test_run_text_output_ends_with_a_summary(app, fake_server, workspace, tmp_path):
    fake_server.push(Reply(text="Nothing to do.", usage={"input_tokens": 30, "cache_creation_input_tokens": 2000,
                                                         "cache_read_input_tokens": 0, "output_tokens": 4}))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    result = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--db", str(tmp_path / "x.db")], env=env)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Nothing to do." in out
    assert "[call 1] read 0 · write 2,000 · fresh 30 · out 4" in out and "miss: cold" in out
    assert "hit ratio (Σread / Σ(read+write+fresh)): 0.0%" in out
    assert "step 1: cold" in out


def test_run_failure_exit_codes(app, fake_server, workspace, tmp_path):
    runner = CliRunner()
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    fake_server.push(Failure(400, {"error": {"type": "invalid_request_error", "message": "model: not found"}}))
    result = runner.invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                 "--db", str(tmp_path / "x.db")], env=env)
    assert result.exit_code == cli_run.EXIT_ERROR and "model: not found" in result.stdout

    result = runner.invoke(app, ["run", "hi", "-m", "nope/x", "-w", str(workspace)], env={})
    assert result.exit_code == cli_run.EXIT_USAGE and "unknown provider" in result.stderr
    result = runner.invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace)],
                           env={"ANTHROPIC_API_KEY": ""})
    assert result.exit_code == cli_run.EXIT_USAGE and "ANTHROPIC_API_KEY" in result.stderr
    result = runner.invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(tmp_path / "missing")])
    assert result.exit_code == cli_run.EXIT_USAGE and "not a directory" in result.stderr


def test_context_overflow_error_names_the_output_token_option(app, fake_server, workspace, tmp_path):
    message = ("prompt (5028 tokens) plus max_tokens (4096) exceeds the model's context window of 8192 tokens; "
               "lower max_tokens to at most 3164 or shorten the conversation")
    fake_server.push(Failure(400, {"error": {"type": "invalid_request_error", "message": message}}))
    result = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--db", str(tmp_path / "x.db")],
                                env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url})
    assert result.exit_code == cli_run.EXIT_ERROR
    assert "--max-output-tokens" in result.stdout


def test_max_cost_warns_once_when_the_model_has_no_price(app, fake_server, workspace, tmp_path):
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    runner = CliRunner()
    warning = "cost limit cannot be enforced: anthropic/made-up-model-9 has no price"
    fake_server.push(Reply(text="ok"))
    result = runner.invoke(app, ["run", "hi", "-m", "anthropic/made-up-model-9", "-w", str(workspace), "--max-cost", "1",
                                 "--db", str(tmp_path / "x.db"), "--allow-unpriced"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.count(warning) == 1
    fake_server.push(Reply(text="ok"))
    priced = runner.invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--max-cost", "1",
                                 "--db", str(tmp_path / "x.db")], env=env)
    assert priced.exit_code == 0 and "cost limit cannot be enforced" not in priced.stderr


def test_unknown_model_names_stop_with_a_suggestion_and_aliases_resolve(app, fake_server, workspace, tmp_path):
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    runner = CliRunner()
    typo = runner.invoke(app, ["run", "hi", "-m", "anthropic/claude-sonet-5", "-w", str(workspace), "--db", str(tmp_path / "x.db")], env=env)
    assert typo.exit_code == cli_run.EXIT_USAGE
    assert "unknown model 'anthropic/claude-sonet-5'" in typo.stderr and "did you mean anthropic/claude-sonnet-5" in typo.stderr
    assert not fake_server.requests  # stopped before any call
    bare = runner.invoke(app, ["run", "hi", "-m", "sonet", "-w", str(workspace)], env=env)
    assert bare.exit_code == cli_run.EXIT_USAGE and "did you mean sonnet (anthropic/claude-sonnet-5)?" in bare.stderr
    fake_server.push(Reply(text="ok"))
    alias = runner.invoke(app, ["run", "hi", "-m", "sonnet", "-w", str(workspace), "--db", str(tmp_path / "x.db")], env=env)
    assert alias.exit_code == 0, alias.output
    assert fake_server.requests[-1].json()["model"] == "claude-sonnet-5"


def test_a_refused_key_and_a_model_the_server_lacks_exit_2(app, fake_server, workspace, tmp_path):
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    args = ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--db", str(tmp_path / "x.db")]
    fake_server.push(Failure(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}))
    refused = CliRunner().invoke(app, args, env=env)
    assert refused.exit_code == cli_run.EXIT_USAGE and "invalid x-api-key" in refused.stdout
    fake_server.push(Failure(404, {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-sonnet-5"}}))
    missing = CliRunner().invoke(app, args, env=env)
    assert missing.exit_code == cli_run.EXIT_USAGE and "not_found_error" in missing.stdout


def test_max_cost_refuses_a_call_that_would_cross_the_limit(app, fake_server, workspace, tmp_path):
    # After a cold first call, each call reads the prefix and costs the same ($0.0006 at
    # claude-sonnet-5 prices): the call that would cross the limit is not made.
    cold = {"input_tokens": 2000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20}
    warm = {"input_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000, "output_tokens": 20}
    fake_server.push(Reply(tool_calls=[("toolu_0", "list_dir", "{}")], usage=cold))
    fake_server.default = lambda record: Reply(tool_calls=[("toolu_x", "list_dir", "{}")], usage=warm)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    result = CliRunner().invoke(app, ["run", "loop", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--max-cost", "0.006", "--db", str(tmp_path / "x.db")], env=env)
    assert result.exit_code == cli_run.EXIT_LIMIT, result.output
    with Ledger(tmp_path / "x.db") as ledger:
        spent = sum(c.cost_usd for c in ledger.calls())
    assert spent <= 0.006
    assert "(as the last cached one did), over the $0.0060 limit" in result.stdout


def test_run_step_limit_exit_code(app, fake_server, workspace, tmp_path):
    fake_server.default = lambda record: Reply(tool_calls=[("toolu_x", "list_dir", "{}")])
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url}
    result = CliRunner().invoke(app, ["run", "loop", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--max-steps", "2", "--db", str(tmp_path / "x.db")], env=env)
    assert result.exit_code == cli_run.EXIT_LIMIT
    assert "max_steps after 2 step(s)" in result.stdout


def test_lint_reports_volatile_text_in_the_head(app, workspace):
    (workspace / "AGENTS.md").write_text("Generated 2026-01-02 at 10:30 by build 4f1e9c2a-1b2c-4d3e-8f9a-0b1c2d3e4f5a.\n")
    result = CliRunner().invoke(app, ["lint", "-w", str(workspace), "-m", "anthropic/claude-sonnet-5"])
    assert result.exit_code == 0, result.output
    assert "volatile_date" in result.stdout and "volatile_uuid" in result.stdout and "[docs AGENTS.md line 1]" in result.stdout


def test_lint_of_a_clean_workspace(app, tmp_path):
    result = CliRunner().invoke(app, ["lint", "-w", str(tmp_path), "-m", "openai/gpt-5.4"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # lines wrap between words at the terminal's width
    assert "for openai/gpt-5.4" in text
    # "No findings" says what was looked at.
    assert "checked: 7 tool schemas, the system prompt and (no project docs found" in text and "no findings" in text


def test_run_applies_the_config_files_permission_rules(app, fake_server, workspace, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[permissions]\ndeny = ["write_file"]\n')
    fake_server.push(
        Reply(tool_calls=[("toolu_1", "write_file", '{"path": "x.txt", "content": "hi"}')]),
        Reply(text="Could not write."),
    )
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "HITRATE_CONFIG": str(config)}
    result = CliRunner().invoke(app, ["run", "Write x.txt", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--json", "--db", str(tmp_path / "p.db")], env=env)
    assert result.exit_code == 0, result.output
    assert not (workspace / "x.txt").exists()
    finished = [json.loads(line) for line in result.stdout.splitlines() if '"tool_call_finished"' in line]
    assert finished and finished[0]["is_error"] and "write_file" in finished[0]["content"]
    result = CliRunner().invoke(app, ["run", "x", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--permissions", "maybe", "--db", str(tmp_path / "p.db")], env=env)
    assert result.exit_code == 2 and "--permissions" in result.stderr
