"""Every command that opens a ledger reports an unusable `--db` as `error: ...`, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer

from hitrate.harness import cli


@pytest.fixture
def fresh_app(monkeypatch: pytest.MonkeyPatch) -> None:
    # `main()` registers into the module's app; give it a fresh one so repeated calls stay clean.
    app = typer.Typer(pretty_exceptions_enable=False)
    app.callback()(lambda: None)
    monkeypatch.setattr(cli, "app", app)


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger"],  # harness command
        ["whatif", "some-run", "--as", "local"],  # entry-point command (evals)
        ["report", "some-run"],
        # Checked before the model is resolved (a local one would load first).
        ["run", "hi", "-m", "openai-compat/m@http://127.0.0.1:9/v1"],
        ["tui", "-m", "openai-compat/m@http://127.0.0.1:9/v1"],
        ["demo"],  # before the demo model is built
    ],
)
def test_folder_as_db_is_a_clean_error(fresh_app, argv, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["hitrate", *argv, "--db", str(tmp_path)])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path} is a directory, not a ledger file" in err
    assert "Traceback" not in err


def test_non_sqlite_db_is_a_clean_error(fresh_app, tmp_path: Path, monkeypatch, capsys) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_text("hello, not sqlite\n" * 100)
    monkeypatch.setattr(sys, "argv", ["hitrate", "ledger", "--db", str(bogus)])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 2
    assert "is not a SQLite ledger file" in capsys.readouterr().err
