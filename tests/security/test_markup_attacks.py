"""Rich markup in strings that users and models choose (a run label, a model name, a task name, a
miss reason, a session's first prompt): `hitrate ledger` and `report` print them as typed. They
are never read as rich tags, which crashed the table (`[/]` closes nothing) or planted a link."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rich.console import Console

from hitrate.store.ledger import Ledger
from hitrate.store.records import CallRecord, MessageRecord
from hitrate.store.usage import Usage

pytestmark = pytest.mark.timeout(120)

LABEL = "[/] nightly [bold"
MODEL = "[/]claude[link=https://evil.example]"
TASK = "[/i]fix-add"
REASON = "prefix_changed(docs, [/]README.md)"
PROMPT = "say [red]hi[/red] [/]"


@pytest.fixture
def ledger_file(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        run = ledger.start_run(label=LABEL, config={"kind": "eval"})
        task = ledger.start_task(TASK, run_id=run.id)
        session = ledger.start_session(run_id=run.id, task_id=task.id, backend="anthropic", model=MODEL)
        body = json.dumps({"role": "user", "content": [{"type": "text", "text": PROMPT}]})
        ledger.append_message(MessageRecord(session_id=session.id, seq=0, kind="user", body=body))
        ledger.record_call(CallRecord(
            run_id=run.id, task_id=task.id, session_id=session.id, backend="anthropic", model=MODEL,
            started_at=datetime.now(timezone.utc), miss_reason=REASON,
            usage=Usage(fresh_input=10, cache_write_5m=0, cache_write_1h=0, cache_read=0, output=3),
        ))  # fmt: skip
        ledger.finish_task(task.id, "fail")
        ledger.finish_run(run.id)
    return path, run.id


def _hitrate(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "hitrate.harness.cli", *argv], capture_output=True, text=True,
                          env=env, timeout=90, check=False)  # fmt: skip


@pytest.mark.parametrize("by", [None, "run", "task", "model", "session"])
def test_markup_in_labels_and_model_names_does_not_crash_the_ledger(ledger_file, by) -> None:
    path, _ = ledger_file
    done = _hitrate("ledger", "--db", str(path), *(["--by", by] if by else []))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MarkupError" not in done.stderr
    shown = {None: [PROMPT, "claude[link=https://evil.example]"], "run": [LABEL], "task": [TASK],
             "model": [MODEL], "session": []}[by]  # fmt: skip
    for text in shown:
        assert text in done.stdout


def test_markup_in_labels_model_names_and_miss_reasons_does_not_crash_the_report(ledger_file) -> None:
    path, run_id = ledger_file
    done = _hitrate("report", run_id, "--db", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    flat = " ".join(done.stdout.split())
    for text in (LABEL, MODEL, REASON.split("(")[0]):
        assert text in flat
    assert "[/]README.md" in flat


def test_markup_in_a_model_name_does_not_crash_the_leaderboard(ledger_file) -> None:
    path, run_id = ledger_file
    done = _hitrate("report", run_id, "--leaderboard", "--db", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert MODEL.split("[link")[0] in done.stdout


def test_markup_in_an_eval_label_and_run_id_does_not_crash_the_progress_bar() -> None:
    from hitrate.evals.progress import RichProgress

    out = io.StringIO()
    with RichProgress("[/] eval [bold", console=Console(file=out, width=120, force_terminal=False)) as progress:
        progress.run_started("run-[/]-x[/i]", total=1, skipped=0)
    assert "[/] eval [bold" in out.getvalue() and "/]-x[/i]" in out.getvalue()  # the last 8 characters of the id
