"""`report` and `whatif` take the shortened ids `hitrate ledger` prints (any unique prefix, as
`run --resume` does), and `whatif --as` the short model names `run --model` takes."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from hitrate.evals.commands.report import register as register_report
from hitrate.evals.commands.whatif import register as register_whatif
from hitrate.harness.models import MODEL_ALIASES
from hitrate.store.ledger import Ledger

from test_evals_report import populate
from test_evals_whatif_ledger import drive_session, record

RUN = "20260501T120000Z-4f2a9c1e"


def _invoke(*args: str):
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register_report(app)
    register_whatif(app)
    return CliRunner().invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_whatif_takes_a_prefix_of_the_run_and_a_short_model_name(tmp_path):
    db = tmp_path / "ledger.db"
    with Ledger(db) as ledger:
        record(ledger, drive_session(4), run_id=RUN)
    whole = _invoke("whatif", RUN, "--db", str(db), "--as", MODEL_ALIASES["sonnet"])
    short = _invoke("whatif", RUN[:9], "--db", str(db), "--as", "sonnet")
    assert whole.exit_code == 0 and short.exit_code == 0, short.output
    assert short.output == whole.output and f"run {RUN}" in short.output
    # The session's own id, by a prefix, selects the same calls.
    by_session = _invoke("whatif", "se", "--db", str(db), "--as", "sonnet")
    assert by_session.exit_code == 0 and "session sess" in by_session.output


def test_whatif_says_when_a_prefix_matches_nothing_or_several(tmp_path):
    db = tmp_path / "ledger.db"
    with Ledger(db) as ledger:
        record(ledger, drive_session(2), run_id=RUN)
        record(ledger, drive_session(2), run_id=RUN[:-1] + "f")
    none = _invoke("whatif", "zz", "--db", str(db), "--as", "sonnet")
    assert none.exit_code == 2 and "no run, session or task id starts with 'zz'" in none.output
    several = _invoke("whatif", RUN[:9], "--db", str(db), "--as", "sonnet")
    assert several.exit_code == 2 and "start with '20260501T'" in several.output and "give more characters" in several.output


def _without_time(report_json: str) -> dict:
    report = json.loads(report_json)
    report.pop("generated_at")
    return report


def test_report_takes_prefixes_of_run_ids(tmp_path):
    db = tmp_path / "ledger.db"
    with Ledger(db) as ledger:
        populate(ledger)
    whole = _invoke("report", "run-cold", "run-naive", "--db", str(db), "-f", "json")
    short = _invoke("report", "run-c", "run-n", "--db", str(db), "-f", "json")
    assert whole.exit_code == 0 and short.exit_code == 0, short.output
    assert _without_time(short.output) == _without_time(whole.output)
    ambiguous = _invoke("report", "run-", "--db", str(db))
    assert ambiguous.exit_code == 2 and "3 runs start with 'run-'" in ambiguous.output
