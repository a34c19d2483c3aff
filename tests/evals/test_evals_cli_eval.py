"""`hitrate eval`, `hitrate ledger-merge` and `hitrate demo`: registration and argument errors."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
import typer
from typer.testing import CliRunner

from hitrate.evals.commands import eval as cli_eval
from hitrate.evals.commands import merge as cli_merge
from hitrate.harness.cli import _HARNESS_COMMAND_MODULES

FAKE = "openai-compat/fake@http://127.0.0.1:9/v1"


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    cli_eval.register(app)
    cli_merge.register(app)
    return app


def test_commands_come_from_evals_entry_points():
    names = {ep.name: ep.value for ep in entry_points(group="hitrate.commands")}
    assert names["eval"] == "hitrate.evals.commands.eval:register"
    assert names["ledger-merge"] == "hitrate.evals.commands.merge:register"
    assert names["demo"] == "hitrate.evals.commands.demo:register"
    assert "hitrate.harness.cli_demo" not in _HARNESS_COMMAND_MODULES  # one `demo` command, no clash


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resume", "r1", "--model", FAKE], "no run 'r1'"),
        (["--model", FAKE, "--nonce-from", "r1"], "--nonce-from is for warm runs"),
        (["--model", FAKE, "--replay-from", "r1"], "--replay-from needs --policy replay"),
        (["--model", FAKE, "--shard", "4/3"], "shard"),
        (["no-such-suite", "--model", FAKE], "neither a folder nor a bundled suite"),
        (["--model", "nope"], "has no provider"),
        (["--model", FAKE, "--cache", "warm", "--nonce-from", "r9"], "no run 'r9'"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(app, tmp_path, args, message):
    result = CliRunner().invoke(app, ["eval", *args, "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_resume_of_an_unknown_run(app, tmp_path):
    result = CliRunner().invoke(app, ["eval", "--resume", "r1", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and "no run 'r1'" in " ".join(result.output.split())


def test_merge_cli_reports_a_bad_input(app, tmp_path):
    result = CliRunner().invoke(app, ["ledger-merge", str(tmp_path / "out.db"), str(tmp_path / "missing.db")])
    assert result.exit_code == 2 and "missing.db: no such ledger file" in result.output


def _stored_run(db, **settings) -> str:
    from hitrate.evals.runner import RUN_KIND
    from hitrate.evals.settings import EvalSettings
    from hitrate.evals.task import resolve_suite_path
    from hitrate.store.ledger import Ledger

    stored = EvalSettings(suite=str(resolve_suite_path(None).resolve()), model=FAKE, **settings)
    with Ledger(db) as ledger:
        return ledger.start_run("stored", {"kind": RUN_KIND, "settings": stored.model_dump(mode="json")}).id


def test_resume_accepts_the_runs_own_settings_and_names_the_ones_that_differ(app, tmp_path):
    db = tmp_path / "x.db"
    run_id = _stored_run(db, policy="replay", task_ids=["roman-parse", "json-pointer"])
    same = ["basic", "--model", FAKE, "--policy", "replay", "-t", "json-pointer", "-t", "roman-parse"]
    differs = CliRunner().invoke(app, ["eval", "--resume", run_id, *same, "--layout", "naive", "--db", str(db)])
    assert differs.exit_code == 2
    text = " ".join(differs.output.split())
    assert "--layout differs (run: cache-aware, given: naive)" in text
    assert "--model differs" not in text and "--task differs" not in text and "--policy differs" not in text
    # The same settings as the run's (task order aside) clash with nothing.
    given = {"suite": "basic", "--model": FAKE, "--layout": None, "--cache": cli_eval.CacheChoice.cold, "--tries": 1,
             "--policy": cli_eval.PolicyChoice.replay, "--replay-from": None, "--task": ["json-pointer", "roman-parse"],
             "--shard": None, "--run-id": run_id, "--nonce-from": None, "--max-output-tokens": None, "--label": None}
    assert cli_eval._resume_clashes(db, run_id, given) == []
