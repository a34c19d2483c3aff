"""`hitrate suite list` / `hitrate suite check` through the real typer app and entry point."""

from __future__ import annotations

import shutil
from importlib.metadata import entry_points
from pathlib import Path

import typer
from typer.testing import CliRunner

from hitrate.evals.commands.suite import register
from hitrate.evals.task import bundled_suite_path, load_suite

from evals_task_factory import FIXED, write_task

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return app


def test_entry_point_is_declared() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="hitrate.commands")}
    assert found.get("suite") == "hitrate.evals.commands.suite:register"


def test_list_shows_every_bundled_task() -> None:
    result = runner.invoke(_app(), ["suite", "list"])
    assert result.exit_code == 0, result.output
    for task in load_suite(bundled_suite_path()).tasks:
        assert task.id in result.output


def test_check_one_sound_task(tmp_path: Path) -> None:
    write_task(tmp_path, "fix-add")
    write_task(tmp_path, "other-task")
    result = runner.invoke(_app(), ["suite", "check", str(tmp_path), "--task", "fix-add", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "fix-add" in result.output and "other-task" not in result.output
    assert "1/1 tasks sound" in result.output


def test_check_fails_on_a_broken_task(tmp_path: Path) -> None:
    write_task(tmp_path, "fix-add")
    write_task(tmp_path, "already-fixed", workspace={"mathx.py": FIXED})
    result = runner.invoke(_app(), ["suite", "check", str(tmp_path), "--show-output"])
    assert result.exit_code == 1, result.output
    assert "BROKEN" in result.output
    assert "fail_to_pass test already passes on workspace/" in result.output
    assert "1/2 tasks sound" in result.output
    assert "pytest output on workspace/" in result.output


def test_malformed_suite_and_unknown_task_exit_2(tmp_path: Path) -> None:
    task_dir = write_task(tmp_path, "fix-add")
    result = runner.invoke(_app(), ["suite", "check", str(tmp_path), "--task", "nope"])
    assert result.exit_code == 2 and "nope" in result.output
    shutil.rmtree(task_dir / "solution")
    result = runner.invoke(_app(), ["suite", "list", str(tmp_path)])
    assert result.exit_code == 2
    assert "missing or empty solution/ folder" in result.output
    result = runner.invoke(_app(), ["suite", "list", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "neither a folder nor a bundled suite" in result.output
