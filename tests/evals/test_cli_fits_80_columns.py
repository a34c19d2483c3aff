"""Every table command (ledger in all its views, prices, suite list, report, whatif, lint) and every
`--help` fits 80 columns, piped, with COLUMNS unset or 80: the width of a default terminal, of a
pager, and of a CI log. Option names in `--help` are whole."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hitrate.harness.cli import _register_all, app
from hitrate.harness.commands.help_panels import fit_option_panels
from hitrate.projection.transcript import TextBlock, UserMessage
from hitrate.store.ledger import Ledger
from hitrate.store.normalize import from_anthropic
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord, MessageRecord

from test_evals_report import populate
from test_evals_whatif_ledger import drive_session, record

T0 = datetime(2026, 11, 30, 9, 15, tzinfo=timezone.utc)
SESSION = "01a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6"
WIDTHS = ({"COLUMNS": None}, {"COLUMNS": "80"})


@pytest.fixture(scope="module")
def cli():
    _register_all(app)
    fit_option_panels()  # what `hitrate --help` does before it prints (hitrate.harness.cli.main)
    return app


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory) -> Path:
    """Eval runs (cold, warm, naive, two demo layouts), a whatif-able run, and an interactive
    session with a long first prompt and failed calls."""
    db = tmp_path_factory.mktemp("eighty") / "ledger.db"
    table = PriceTable.default()
    with Ledger(db) as ledger:
        populate(ledger)
        record(ledger, drive_session(4), run_id="20261130T091500Z-8c1d2e3f")
        for layout in ("cache-aware", "naive"):
            run = ledger.start_run(f"demo · {layout} · qwen2.5-coder-0.5b-instruct", {"layout": layout})
            ledger.record_call(CallRecord(run_id=run.id, backend="local", model="qwen2.5-coder-0.5b-instruct",
                                          started_at=T0, usage=from_anthropic({"input_tokens": 900, "output_tokens": 40})))
        ledger.start_session(backend="anthropic", model="claude-sonnet-4-6", session_id=SESSION)
        prompt = "make the failing test in tests/test_parser.py pass without touching the public API of the parser module"
        body = UserMessage(content=(TextBlock(text=prompt),)).model_dump_json()
        ledger.append_message(MessageRecord(session_id=SESSION, seq=0, kind="user", body=body))
        for i in range(3):
            raw = {"input_tokens": 40, "cache_creation_input_tokens": 0 if i else 12_000,
                   "cache_read_input_tokens": 12_000 if i else 0, "output_tokens": 250}
            ledger.record_call(CallRecord(session_id=SESSION, backend="anthropic", model="claude-sonnet-4-6",
                                          started_at=T0 + timedelta(seconds=30 * i), usage=from_anthropic(raw),
                                          miss_reason="cold" if i == 0 else None), price_table=table)
        for i in range(11):
            ledger.record_call(CallRecord(session_id=SESSION, backend="anthropic", model="claude-sonnet-4-6",
                                          started_at=T0 + timedelta(minutes=5, seconds=i), error="overloaded_error: busy"))
    return db


def _table_commands(db: Path, workspace: Path) -> list[list[str]]:
    d = ["--db", str(db)]
    ledger_views = [["ledger", *d], *(["ledger", *d, "--by", by] for by in ("day", "run", "task", "model", "backend", "kind")),
                    ["ledger", *d, "--calls", SESSION[:9]], ["ledger", *d, "--flagged"]]
    return [
        *ledger_views,
        ["prices"], ["prices", "--model", "sonnet"],
        ["suite", "list"],
        ["report", "run-cold", "run-warm", "run-naive", *d], ["report", "--leaderboard", "run-cold", "run-naive", *d],
        ["whatif", "20261130T", *d, "--as", "sonnet", "--as", "gpt", "--as", "deepseek", "--as", "local", "--per-call"],
        ["lint", "-w", str(workspace), "-m", "anthropic/claude-sonnet-4-6"],
    ]


def _help_paths(command, path=()) -> list[list[str]]:
    paths = [list(path)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            paths += _help_paths(sub, (*path, name))
    return paths


def _too_wide(output: str) -> list[str]:
    return [line for line in output.splitlines() if len(line) > 80]


def test_every_table_command_fits_80_columns(cli, ledger_db, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Run the tests with pytest -q.\n")
    runner = CliRunner()
    problems = {}
    for env in WIDTHS:
        for args in _table_commands(ledger_db, workspace):
            result = runner.invoke(cli, args, env={"NO_COLOR": "1", **env})
            assert result.exit_code == 0, (args, result.output)
            # A path has a line of its own and may be longer than the terminal; nothing else is.
            wide = [line for line in _too_wide(result.output) if str(ledger_db) not in line and str(workspace) not in line]
            if wide:
                problems[" ".join(args[:3]) + f" COLUMNS={env['COLUMNS']}"] = wide[:3]
    assert not problems, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in problems.items())


def test_every_help_fits_80_columns_with_whole_option_names(cli):
    import typer

    runner = CliRunner()
    problems = {}
    for path in _help_paths(typer.main.get_command(cli)):
        for env in WIDTHS:
            result = runner.invoke(cli, [*path, "--help"], env={"NO_COLOR": "1", **env})
            assert result.exit_code == 0, (path, result.output)
            command = typer.main.get_command(cli)
            for name in path:
                command = command.commands[name]
            names = [o for p in command.params if not getattr(p, "hidden", False) for o in (*p.opts, *p.secondary_opts)]
            cut = [n for n in names if n not in result.output]
            wide = _too_wide(result.output)
            if cut or wide:
                problems[" ".join(path) or "hitrate"] = {"cut": cut, "wide": wide[:2]}
    assert not problems, problems
