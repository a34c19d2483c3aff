"""`hitrate ledger`, `prices` and `lint` as an 80-column terminal shows them (syrupy snapshots;
`pytest --snapshot-update` rewrites them after an intended change, to be read in review)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hitrate.harness import cli_run, cli_store
from hitrate.projection.transcript import TextBlock, UserMessage
from hitrate.store.ledger import Ledger
from hitrate.store.litellm_import import import_litellm
from hitrate.store.normalize import from_anthropic
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord, MessageRecord

EXCERPT = Path(__file__).parent.parent / "store" / "data" / "litellm_prices_excerpt.json"
T0 = datetime(2026, 11, 30, 9, 15, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    application = typer.Typer()

    @application.callback()
    def _root() -> None:
        """test root"""

    cli_store.register(application)
    cli_run.register(application)
    return application


def _invoke(app: typer.Typer, *args: str, replace: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    out = result.output
    for old, new in (replace or {}).items():
        out = out.replace(old, new)
    # Checked after the temporary paths are replaced: a path has a line of its own, never wrapped.
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    return out


@pytest.fixture
def ledger_db(tmp_path: Path) -> Path:
    """Three sessions over two days, one with a failed call, one on an unpriced model."""
    db = tmp_path / "ledger.db"
    table = PriceTable.default()
    sessions = [
        ("01a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6", "claude-sonnet-4-6", "make the failing test in tests/test_parser.py pass", 0, 4),
        ("01a2b3c4d5e6a1b2c3d4e5f6a7b8c9d0", "claude-sonnet-4-6", "add a --json flag to the export command", 3, 6),
        ("01a2b3c4f0e19f8e7d6c5b4a39281706", "claude-haiku-4-5", "why does every call miss the cache?", 26, 3),
    ]
    with Ledger(db) as ledger:
        for session_id, model, prompt, hours, calls in sessions:
            ledger.start_session(backend="anthropic", model=model, session_id=session_id)
            body = UserMessage(content=(TextBlock(text=prompt),)).model_dump_json()
            ledger.append_message(MessageRecord(session_id=session_id, seq=0, kind="user", body=body))
            for i in range(calls):
                raw = {"input_tokens": 40, "cache_creation_input_tokens": 0 if i else 12_000,
                       "cache_read_input_tokens": 12_000 + 900 * i if i else 0, "output_tokens": 250}  # fmt: skip
                ledger.record_call(CallRecord(session_id=session_id, backend="anthropic", model=model,
                                              started_at=T0 + timedelta(hours=hours, seconds=30 * i),
                                              usage=from_anthropic(raw)), price_table=table)  # fmt: skip
        ledger.record_call(CallRecord(session_id=sessions[1][0], backend="anthropic", model="claude-sonnet-4-6",
                                      started_at=T0 + timedelta(hours=3, minutes=5), error="overloaded_error: busy"))
    return db


def test_ledger_sessions_at_80_columns(app, ledger_db, snapshot):
    out = _invoke(app, "ledger", "--db", str(ledger_db), replace={str(ledger_db): "<db>"})
    # Newest first, under a total per day; money as money; the first prompt per session.
    assert out.index("2026-12-01") < out.index("2026-11-30") and "$0.0" in out and "why does every" in out
    assert out == snapshot


def test_ledger_limit_since_and_groups_at_80_columns(app, ledger_db, snapshot):
    limited = _invoke(app, "ledger", "--db", str(ledger_db), "--limit", "1", replace={str(ledger_db): "<db>"})
    assert "1 of 3 sessions" in limited and "2 older session(s) not shown" in limited
    since = _invoke(app, "ledger", "--db", str(ledger_db), "--since", "2026-11-30T11:00", replace={str(ledger_db): "<db>"})
    assert "make the failing" not in since and "add a --json" in since
    by_model = _invoke(app, "ledger", "--db", str(ledger_db), "--by", "model", replace={str(ledger_db): "<db>"})
    by_kind = _invoke(app, "ledger", "--db", str(ledger_db), "--by", "kind", replace={str(ledger_db): "<db>"})
    assert by_kind.splitlines()[3].split()[0] == "call"  # ordinary calls are `call`, not "(none)"
    by_day = _invoke(app, "ledger", "--db", str(ledger_db), "--by", "day", replace={str(ledger_db): "<db>"})
    days = [json.loads(_invoke(app, "ledger", "--db", str(ledger_db), "--by", "day", "--json"))[i]["key"] for i in (0, 1)]
    assert days == ["2026-12-01", "2026-11-30"]
    assert {"model": by_model, "kind": by_kind, "day": by_day} == snapshot


def test_prices_at_80_columns(app, tmp_path, snapshot):
    snapshot_file = tmp_path / "prices.json"
    imported = import_litellm(json.loads(EXCERPT.read_text()), as_of=date(2026, 11, 1), source="litellm excerpt")
    snapshot_file.write_text(PriceTable(imported).to_json())
    sonnet = _invoke(app, "prices", "--prices", str(snapshot_file), "--model", "sonnet")
    header = next(line for line in sonnet.splitlines() if line.startswith("model"))
    assert header.split() == ["model", "in", "out", "w5m", "w1h", "read", "min"]  # no empty columns
    everything = _invoke(app, "prices", "--prices", str(snapshot_file))
    assert {"sonnet": sonnet, "all": everything} == snapshot


def test_lint_at_80_columns(app, tmp_path, snapshot):
    findings = tmp_path / "with-findings"
    findings.mkdir()
    (findings / "AGENTS.md").write_text("Generated 2026-01-02 at 10:30 by build 4f1e9c2a-1b2c-4d3e-8f9a-0b1c2d3e4f5a.\n")
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "AGENTS.md").write_text("Run the tests with `pytest -q`.\n")
    outs = {name: _invoke(app, "lint", "-w", str(ws), "-m", "anthropic/claude-sonnet-4-6", replace={str(ws): "<ws>"})
            for name, ws in (("findings", findings), ("clean", clean))}  # fmt: skip
    assert "fix: edit AGENTS.md line 1: delete the date '2026-01-02'" in outs["findings"]
    checked = next(line for line in outs["clean"].splitlines() if line.startswith("checked:"))
    assert checked.startswith("checked: 7 tool schemas, the system prompt and AGENTS.md")
    assert outs == snapshot
