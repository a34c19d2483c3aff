"""The ledger holds whole transcripts: it is private to its user (0600 in a 0700 folder, looser
files tightened), and the commands that only read it work on a read-only file and folder, without
writing a byte, or say clearly that an old schema needs a migration first.

Root writes every file whatever its mode, so as root the read-only commands run without the
capabilities that let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, dropped with `setpriv`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlite_utils import Database

from hitrate.store.ledger import Ledger
from hitrate.store.ledger_schema import SCHEMA_VERSION, migrate
from hitrate.store.records import CallRecord, CallSection
from hitrate.store.usage import Usage

pytestmark = pytest.mark.timeout(120)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _record_a_run(path: Path) -> str:
    with Ledger(path) as ledger:
        run = ledger.start_run(label="nightly")
        task = ledger.start_task("fix-add", run_id=run.id)
        session = ledger.start_session(run_id=run.id, task_id=task.id, backend="anthropic", model="claude-sonnet-4-6")
        ledger.record_call(CallRecord(
            run_id=run.id, task_id=task.id, session_id=session.id, backend="anthropic", model="claude-sonnet-4-6",
            started_at=datetime.now(timezone.utc), miss_reason="cold",
            sections=[CallSection(kind="system", index=0, hash="a" * 64, tokens=2048, block_tokens=[2048])],
            usage=Usage(fresh_input=10, cache_write_5m=2048, cache_write_1h=0, cache_read=0, output=3),
        ))  # fmt: skip
        ledger.finish_task(task.id, "pass")
        ledger.finish_run(run.id)
    return run.id


def test_a_new_ledger_is_0600_in_a_0700_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "ledger.db"
    with Ledger(path) as ledger:
        ledger.start_run(label="x")
        assert _mode(path.parent) == 0o700
        for file in (path, path.with_name("ledger.db-wal"), path.with_name("ledger.db-shm")):
            assert _mode(file) == 0o600, file


def test_a_loose_ledger_in_hitrates_own_folder_is_tightened(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("HITRATE_DB", raising=False)
    folder = tmp_path / "data" / "hitrate"
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    sqlite3.connect(folder / "ledger.db").close()
    (folder / "ledger.db").chmod(0o644)
    Ledger().close()
    assert _mode(folder) == 0o700
    assert _mode(folder / "ledger.db") == 0o600


def test_a_folder_the_user_chose_keeps_its_mode_but_the_file_is_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    path = folder / "runs.db"
    sqlite3.connect(path).close()
    path.chmod(0o664)
    Ledger(path).close()
    assert _mode(folder) == 0o755
    assert _mode(path) == 0o600


def _without_root_writes() -> list[str]:
    if os.getuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no file can be made read-only")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def _hitrate(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([*_without_root_writes(), sys.executable, "-m", "hitrate.harness.cli", *argv],
                          capture_output=True, text=True, env=env, timeout=90, check=False)  # fmt: skip


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture
def read_only_ledger(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    folder = tmp_path / "archive"
    path = folder / "ledger.db"
    run_id = _record_a_run(path)
    path.chmod(0o400)
    folder.chmod(0o500)
    yield path, run_id
    folder.chmod(0o700)


@pytest.mark.parametrize("command", ["ledger", "ledger --by run", "report", "whatif"])
def test_read_only_commands_work_on_a_read_only_ledger_and_write_nothing(read_only_ledger, command) -> None:
    path, run_id = read_only_ledger
    before = _digest(path.parent)
    argv = {"ledger": ["ledger"], "ledger --by run": ["ledger", "--by", "run"], "report": ["report", run_id],
            "whatif": ["whatif", run_id, "--as", "anthropic/claude-sonnet-4-6"]}[command]  # fmt: skip
    done = _hitrate(*argv, "--db", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    expected = {"ledger": "claude-sonnet-4-6", "ledger --by run": "nightly", "report": "nightly", "whatif": "anthropic"}
    assert expected[command] in done.stdout
    assert _digest(path.parent) == before


def test_an_old_read_only_ledger_says_a_migration_is_needed(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    path = folder / "ledger.db"
    db = Database(sqlite3.connect(path, isolation_level=None))
    migrate(db, target=SCHEMA_VERSION - 1)
    db.conn.close()
    path.chmod(0o400)
    folder.chmod(0o500)
    try:
        done = _hitrate("ledger", "--db", str(path))
    finally:
        folder.chmod(0o700)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"is read-only and has schema version {SCHEMA_VERSION - 1}" in done.stderr
    assert "to migrate it" in done.stderr and "Traceback" not in done.stderr


def test_a_run_on_a_read_only_ledger_stops_before_any_call(read_only_ledger, tmp_path: Path) -> None:
    path, _ = read_only_ledger
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = _hitrate("run", "hi", "-m", "openai-compat/m@http://127.0.0.1:9/v1", "-w", str(workspace), "--db", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the file or its folder is read-only" in done.stderr and "cannot reach" not in done.stdout + done.stderr
