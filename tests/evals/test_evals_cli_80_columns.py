"""`hitrate report` and `hitrate whatif` as an 80-column terminal shows them (syrupy snapshots;
`pytest --snapshot-update` rewrites them after an intended change, to be read in review)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from hitrate.evals.cli_report import register as register_report
from hitrate.evals.cli_whatif import register as register_whatif
from hitrate.store.ledger import Ledger

from test_evals_report import populate
from test_evals_whatif_ledger import drive_session, record


def _invoke(*args: str) -> str:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register_report(app)
    register_whatif(app)
    result = CliRunner().invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    return result.output


def test_report_at_80_columns(tmp_path, snapshot):
    db = tmp_path / "ledger.db"
    with Ledger(db) as ledger:
        populate(ledger)
    out = _invoke("report", "run-cold", "run-naive", "--db", str(db))
    assert "hit" not in [line.split()[0] for line in out.splitlines() if line.startswith("  ")]  # not a miss reason
    assert out == snapshot


def test_whatif_at_80_columns(tmp_path, snapshot):
    db = tmp_path / "ledger.db"
    with Ledger(db) as ledger:
        record(ledger, drive_session(6))
    out = _invoke("whatif", "run-1", "--db", str(db), "--as", "anthropic/claude-sonnet-4-6", "--as", "openai/gpt-4.1",
                  "--as", "deepseek/deepseek-flash")
    assert out == snapshot
