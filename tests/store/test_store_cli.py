"""`hitrate prices` and `hitrate ledger` through typer's CliRunner."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hitrate.harness.commands import store as cli_store
from hitrate.store.ledger import Ledger
from hitrate.store.normalize import from_anthropic, from_deepseek
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord

WIDE = {"COLUMNS": "400"}
EXCERPT = Path(__file__).parent / "data" / "litellm_prices_excerpt.json"
T0 = datetime(2026, 11, 18, 12, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    application = typer.Typer()

    @application.callback()
    def _root() -> None:
        """test root"""

    cli_store.register(application)
    return application


runner = CliRunner()


def _cells(line: str) -> list[str]:
    return line.split()


def test_prices_table_shows_rates_tiers_date_and_source(app: typer.Typer) -> None:
    result = runner.invoke(app, ["prices", "--model", "haiku-5-5"], env=WIDE)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # Columns no listed model has (OpenAI's 30m and 12h writes) are left out.
    assert _cells(next(line for line in lines if line.startswith("model"))) == ["model", "in", "out", "w5m", "w1h", "read", "min"]
    row = next(line for line in lines if line.startswith("claude-haiku-5-5 "))
    assert _cells(row) == ["claude-haiku-5-5", "0.1", "0.5", "0.125", "0.2", "0.01", "512"]
    # Tier notes, the date and the source sit under the table, one note per model.
    note = next(line for line in lines if line.startswith("claude-haiku-5-5:"))
    assert ">100K: in 0.5 out 2.5 w5m 0.625 w1h 1 read 0.05" in note
    assert note.endswith("as of 2026-10-24; source https://github.com/kurofune/claudit/releases/tag/v1.9.2")
    assert "claude-opus-5" not in result.output


def test_prices_show_geography_speed_and_web_search_fee(app: typer.Typer) -> None:
    result = runner.invoke(app, ["prices", "--model", "opus-5-5"], env=WIDE)
    note = next(line for line in result.output.splitlines() if line.startswith("claude-opus-5-5:"))
    assert "geo us x1.1" in note and "speed fast x2" in note and "web search $0.01/request" in note
    assert "web fetch" not in note  # free: nothing to show


def test_prices_shows_peak_hours_and_openai_write_classes(app: typer.Typer) -> None:
    deepseek = runner.invoke(app, ["prices", "-m", "deepseek-flash"], env=WIDE)
    assert "peak 01:00-04:00, 06:00-10:00 UTC weekdays: in 0.3 out 1.2 read 0.006" in deepseek.output
    gpt = runner.invoke(app, ["prices", "-m", "gpt-5.6-terra"], env=WIDE)
    lines = gpt.output.splitlines()
    assert _cells(next(line for line in lines if line.startswith("model"))) == ["model", "in", "out", "w30m", "w12h", "read"]
    assert _cells(next(line for line in lines if line.startswith("gpt-5.6-terra "))) == ["gpt-5.6-terra", "2", "12", "2.5", "5", "0.2"]


def test_prices_json_matches_the_table(app: typer.Typer) -> None:
    result = runner.invoke(app, ["prices", "--model", "gpt-4.1", "--json"])
    entries = json.loads(result.output)
    assert [e["model"] for e in entries] == ["gpt-4.1", "gpt-4.1-mini"]
    assert entries[0] == PriceTable.default().lookup("gpt-4.1").model_dump(mode="json")


def test_prices_from_a_litellm_file_and_errors(app: typer.Typer, tmp_path: Path) -> None:
    imported = runner.invoke(app, ["prices", "--litellm", str(EXCERPT), "-m", "gpt-5.6", "--json"])
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)[0]["schedules"][0]["tiers"][0]["write_30m"] == 5.0
    also = runner.invoke(app, ["prices", "--prices", str(EXCERPT), "-m", "gpt-5.6", "--json"])
    assert json.loads(also.output) == json.loads(imported.output)
    unknown = runner.invoke(app, ["prices", "--model", "no-such-model"])
    assert unknown.exit_code == 1 and "no model matches" in unknown.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    broken = runner.invoke(app, ["prices", "--snapshot", str(bad)])
    assert broken.exit_code == 1 and "cannot read prices" in broken.output


def _fill(path: Path) -> str:
    table = PriceTable.default()
    with Ledger(path) as ledger:
        run = ledger.start_run("cli")
        write = {"input_tokens": 21, "cache_creation_input_tokens": 188086, "cache_read_input_tokens": 0, "output_tokens": 393}
        read = {**write, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 188086}
        for i, raw in enumerate([write, read, read]):
            ledger.record_call(
                CallRecord(run_id=run.id, session_id="s-anthropic", backend="anthropic", model="claude-opus-5", started_at=T0 + timedelta(seconds=i), usage=from_anthropic(raw)),
                price_table=table,
            )
        ledger.record_call(
            CallRecord(
                run_id=run.id,
                session_id="s-deepseek",
                backend="deepseek",
                model="deepseek-flash",
                started_at=T0 + timedelta(seconds=9),
                usage=from_deepseek({"prompt_tokens": 1000, "completion_tokens": 10, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 1000}),
            ),
            price_table=table,
        )
        return run.id


def test_ledger_summary_by_session(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _fill(path)
    result = runner.invoke(app, ["ledger", "--db", str(path), "--by", "session", "--json"])
    assert result.exit_code == 0, result.output
    groups = {g["key"]: g["totals"] for g in json.loads(result.output)}
    anth = groups["s-anthropic"]
    assert (anth["calls"], anth["cache_write_5m"], anth["cache_read"], anth["fresh_input"]) == (3, 188086, 376172, 63)
    assert anth["hit_ratio"] == pytest.approx(376172 / (376172 + 188086 + 63))
    assert anth["calls_with_hit_share"] == pytest.approx(2 / 3)
    assert anth["cost_usd"] == pytest.approx(1.1854675 + 2 * 0.103973)
    assert groups["s-deepseek"]["cost_usd"] == pytest.approx((1000 * 0.15 + 10 * 0.60) / 1e6)

    table = runner.invoke(app, ["ledger", "--db", str(path), "--by", "model"], env=WIDE)
    row = next(line for line in table.output.splitlines() if line.startswith("claude-opus-5"))
    # calls, fresh, write, read, output, Σ-hit, any-hit, cost: compact counts, money to 4 places.
    assert _cells(row)[1:] == ["3", "63", "188k", "376k", "1,179", "66.7%", "67%", "$1.3934"]


def test_ledger_at_80_columns_counts_failures_and_keeps_figures_whole(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ok = {"input_tokens": 21, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 500, "output_tokens": 9}
    with Ledger(path) as ledger:
        session = ledger.start_session(backend="anthropic", model="claude-opus-5")
        for i in range(2):
            ledger.record_call(CallRecord(session_id=session.id, backend="anthropic", model="claude-opus-5",
                                          started_at=T0 + timedelta(seconds=i), usage=from_anthropic(ok)))
        for i in range(3):
            ledger.record_call(CallRecord(session_id=session.id, backend="anthropic", model="claude-opus-5",
                                          started_at=T0 + timedelta(seconds=5 + i), error="overloaded_error: busy"))
    result = runner.invoke(app, ["ledger", "--db", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert all(len(line) <= 80 for line in result.output.splitlines())
    (row,) = [line for line in result.output.splitlines() if session.id[:8] in line]
    assert _cells(row)[:4] == ["12:00", session.id[:8], "claude-opus-5", "-"]
    assert _cells(row)[4:] == ["5", "(3✗)", "96.0%", "unpriced"]
    assert "n✗: calls that failed" in result.output
    # Failed calls are counted apart, not as unknown buckets (only the two answered calls lack
    # a reasoning count: Anthropic reports none).
    totals = json.loads(runner.invoke(app, ["ledger", "--db", str(path), "--json"]).output)[0]["totals"]
    assert totals["failed_calls"] == 3 and totals["unknown"] == {"reasoning": 2}


def test_ledger_by_model_and_run_env_and_missing_file(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "env.db"
    run_id = _fill(path)
    by_model = runner.invoke(app, ["ledger", "--by", "model", "--json"], env={"HITRATE_DB": str(path)})
    assert {g["key"]: g["totals"]["calls"] for g in json.loads(by_model.output)} == {"claude-opus-5": 3, "deepseek-flash": 1}
    by_run = runner.invoke(app, ["ledger", "--db", str(path), "--by", "run", "--run", run_id], env=WIDE)
    assert run_id in by_run.output and "cli" in by_run.output
    # The shortened id the table prints selects the same run.
    by_prefix = runner.invoke(app, ["ledger", "--db", str(path), "--by", "run", "--run", run_id[:9]], env=WIDE)
    assert by_prefix.output == by_run.output
    unknown = runner.invoke(app, ["ledger", "--db", str(path), "--run", "zz"])
    assert unknown.exit_code == 1 and "no run id starts with 'zz'" in unknown.output
    missing = runner.invoke(app, ["ledger", "--db", str(tmp_path / "nope.db")])
    assert missing.exit_code == 0 and "no calls recorded yet: there is no ledger at" in missing.output
    assert not (tmp_path / "nope.db").exists()
    bad_group = runner.invoke(app, ["ledger", "--db", str(path), "--by", "colour"])
    assert bad_group.exit_code == 1 and "--by must be one of" in bad_group.output


def test_ledger_shows_flagged_calls_with_their_flags(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    # The documented web-search stream's shape, from a proxy whose message_start split is short of
    # the cumulative write total the final message_delta reports.
    raw = {"input_tokens": 10682, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 510,
           "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 1000},
           "server_tool_use": {"web_search_requests": 1}}
    with Ledger(path) as ledger:
        ledger.record_call(
            CallRecord(session_id="s-flag", backend="anthropic", model="claude-opus-5", started_at=T0, usage=from_anthropic(raw), raw_usage=raw),
            price_table=PriceTable.default(),
        )
        ledger.record_call(
            CallRecord(session_id="s-flag", backend="anthropic", model="claude-opus-5", started_at=T0 + timedelta(seconds=1),
                       usage=from_anthropic({"input_tokens": 5, "output_tokens": 1})),
            price_table=PriceTable.default(),
        )
    summary = json.loads(runner.invoke(app, ["ledger", "--db", str(path), "--json"]).output)
    assert summary[0]["totals"]["flagged_calls"] == 1 and summary[0]["totals"]["calls"] == 2

    table = runner.invoke(app, ["ledger", "--db", str(path)], env=WIDE)
    assert table.exit_code == 0, table.output
    assert "(1⚑)" in table.output and "1 flagged call(s)" in table.output
    assert "cache_write_split_short" in table.output and "claude-opus-5" in table.output

    listed = json.loads(runner.invoke(app, ["ledger", "--db", str(path), "--flagged", "--json"]).output)
    assert len(listed) == 1 and listed[0]["raw_usage"] == raw
    assert [f.split(":")[0] for f in listed[0]["flags"]] == ["cache_write_split_short"]


def test_prices_notes_say_what_a_date_and_a_question_mark_mean(app: typer.Typer) -> None:
    out = runner.invoke(app, ["prices", "--model", "sonnet-5-5"], env={"COLUMNS": "80"}).output
    notes = " ".join(out.split())
    # A price that changed: the old rates until the date, and the table's rates since it.
    assert "until 2026-10-07: in 2 out 10" in notes and "the rates above since 2026-10-07;" in notes
    assert "; since 2026-10-07" not in notes
    fable = runner.invoke(app, ["prices", "--model", "fable-5-2"], env={"COLUMNS": "80"}).output
    assert "claude-fable-5-2 (?)" in fable
    assert "(?): from the source its note names, not yet confirmed on the provider's own price page." in " ".join(fable.split())
