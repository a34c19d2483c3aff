"""`hitrate whatif` over a real ledger file."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest
import typer
from typer.testing import CliRunner

from hitrate.evals.commands.whatif import register
from hitrate.store.ledger import Ledger

from test_evals_whatif_ledger import drive_session, record


@pytest.fixture(scope="module")
def ledger_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("whatif") / "ledger.db"
    with Ledger(path) as ledger:
        record(ledger, drive_session(6))
    return path


def run_cli(*args):
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return CliRunner().invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def test_entry_point_is_declared():
    found = {ep.name: ep.value for ep in entry_points(group="hitrate.commands")}
    assert found.get("whatif") == "hitrate.evals.commands.whatif:register"


def test_whatif_prints_predictions_next_to_the_actual(ledger_path):
    result = run_cli(
        "whatif", "run-1", "--db", str(ledger_path),
        "--as", "anthropic/claude-sonnet-4-6", "--as", "openai/gpt-4.1", "--as", "deepseek/deepseek-flash", "--as", "local",
        "--per-call",
    )
    assert result.exit_code == 0, result.output
    out = result.output
    header = "\n".join(out.splitlines()[1:3])  # provider over model, each header on two lines
    for provider, model in (("actual", "claude-sonnet-4-6"), ("anthropic/", "claude-sonnet-4-6"), ("openai/", "gpt-4.1"),
                            ("deepseek/", "deepseek-flash"), ("local", "")):
        assert provider in header and model in header
    assert "unpriced" in out  # the local engine has no price, never $0
    assert "per request: anthropic/claude-sonnet-4-6" in out


def test_whatif_json_with_ttl_and_naive(ledger_path):
    result = run_cli("whatif", "run-1", "--db", str(ledger_path), "--as", "anthropic/claude-sonnet-4-6", "--ttl", "1h", "--json")
    assert result.exit_code == 0, result.output
    hour = json.loads(result.output)["results"][0]
    assert hour["predicted"]["cache_write_1h"] > 0 and hour["predicted"]["cache_write_5m"] == 0
    result = run_cli("whatif", "run-1", "--db", str(ledger_path), "--as", "anthropic/claude-sonnet-4-6", "--naive", "--json")
    naive = json.loads(result.output)["results"][0]
    assert naive["predicted"]["cache_read"] == 0
    assert naive["predicted"]["cost_usd"] > hour["predicted"]["cost_usd"] * 0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--as", "anthropic/gpt-4.1"], "use --as openai/gpt-4.1"),
        (["--as", "anthropic/claude-sonnet-4-6", "--ttl", "2h"], "bad option: ttl"),
        (["--as", "local", "--pool-tokens", "0"], "bad option: pool_tokens"),
    ],
)
def test_whatif_bad_input_is_a_clear_error(ledger_path, args, message):
    result = run_cli("whatif", "run-1", "--db", str(ledger_path), *args)
    assert result.exit_code == 2 and message in result.output


def test_whatif_unknown_id(ledger_path):
    result = run_cli("whatif", "nothing", "--db", str(ledger_path), "--as", "local")
    assert result.exit_code == 2 and "no run, session or task id starts with 'nothing'" in result.output
