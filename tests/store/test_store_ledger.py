"""The SQLite ledger on a real file: round trips, schema migrations, summaries, re-pricing."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import platformdirs
import pytest
from sqlite_utils import Database

from hitrate.store.cost import aggregate, cost
from hitrate.store.ledger import _CALL_COLUMNS, Ledger, default_ledger_path
from hitrate.store.ledger_schema import SCHEMA_VERSION, LedgerVersionError, migrate
from hitrate.store.normalize import from_anthropic, from_openai_compatible
from hitrate.store.prices import PriceSnapshot, PriceTable
from hitrate.store.records import CallRecord, new_id

T0 = datetime(2026, 11, 18, 12, 0, tzinfo=timezone.utc)
TABLE = PriceTable.default()


@pytest.fixture()
def ledger(tmp_path: Path) -> Ledger:
    with Ledger(tmp_path / "ledger.db") as opened:
        yield opened


def anthropic_call(**kw: object) -> CallRecord:
    raw = {"input_tokens": 21, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 188086, "output_tokens": 393}
    fields = {"backend": "anthropic", "model": "claude-opus-5", "started_at": T0, "usage": from_anthropic(raw), "raw_usage": raw}
    return CallRecord(**{**fields, **kw})


def test_file_is_wal_and_current_schema(ledger: Ledger) -> None:
    assert ledger.schema_version == SCHEMA_VERSION
    with ledger.connection() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db = Database(conn)
        assert set(db.table_names()) >= {"runs", "tasks", "sessions", "calls", "price_snapshots"}
        assert set(_CALL_COLUMNS) == set(db["calls"].columns_dict)


def test_call_round_trip_keeps_unknowns_unknown(ledger: Ledger) -> None:
    vllm = from_openai_compatible({"prompt_tokens": 500, "completion_tokens": 20})
    call = CallRecord(
        run_id="r1",
        task_id="t1",
        session_id="s1",
        backend="vllm",
        model="qwen-local",
        started_at=T0,
        ttft_s=0.25,
        latency_s=1.5,
        section_hashes=["aa", "bb", "cc"],
        usage=vllm,
        raw_usage={"prompt_tokens": 500, "completion_tokens": 20},
        miss_reason="prefix_changed(system, tools[2])",
        miss_tokens=480,
        miss_cost_usd=0.0,
        error=None,
        layout="cache_aware",
        cache_mode="cold",
    )
    ledger.record_call(call)
    (back,) = ledger.calls(session_id="s1")
    assert back == call
    assert back.usage.cache_read is None and back.usage.fresh_input is None  # NULL, not 0
    with ledger.connection() as conn:
        row = conn.execute("SELECT cache_read, fresh_input, prompt_total FROM calls").fetchone()
    assert row == (None, None, 500)


def test_duplicate_id_is_refused_and_nothing_lost(ledger: Ledger) -> None:
    call = anthropic_call()
    ledger.record_call(call)
    with pytest.raises(sqlite3.IntegrityError):
        ledger.record_call(call)
    with pytest.raises(sqlite3.IntegrityError):
        ledger.record_calls([anthropic_call(), call])  # the batch is all or nothing
    assert ledger.count_calls() == 1


def test_transaction_rolls_back_as_a_whole(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError):
        with ledger.transaction():
            ledger.record_call(anthropic_call())
            ledger.record_call(anthropic_call())
            raise RuntimeError("worker died")
    assert ledger.count_calls() == 0
    with ledger.transaction():
        for _ in range(3):
            ledger.record_call(anthropic_call())
    assert ledger.count_calls() == 3


def test_record_call_prices_with_a_snapshot(ledger: Ledger) -> None:
    stored = ledger.record_call(anthropic_call(), price_table=TABLE)
    assert stored.cost_usd == pytest.approx(0.103973, abs=1e-12)
    assert stored.price_snapshot_id == TABLE.id
    assert ledger.price_table(TABLE.id).id == TABLE.id
    explicit = ledger.record_call(anthropic_call(cost_usd=1.0, price_snapshot_id="elsewhere"), price_table=TABLE)
    assert explicit.cost_usd == 1.0 and explicit.price_snapshot_id == "elsewhere"
    unpriced = ledger.record_call(anthropic_call(model="my-local-model"), price_table=TABLE)
    assert unpriced.cost_usd is None and unpriced.price_snapshot_id == TABLE.id


def test_snapshot_saved_in_a_rolled_back_transaction_is_saved_again(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError), ledger.transaction():
        ledger.record_call(anthropic_call(), price_table=TABLE)
        raise RuntimeError("abort")
    ledger.record_call(anthropic_call(), price_table=TABLE)
    assert ledger.price_table(TABLE.id).id == TABLE.id


def test_reprice_with_a_newer_snapshot(ledger: Ledger) -> None:
    run = ledger.start_run("reprice")
    for _ in range(4):
        ledger.record_call(anthropic_call(run_id=run.id), price_table=TABLE)
    data = json.loads(TABLE.to_json())
    opus = next(m for m in data["models"] if m["model"] == "claude-opus-5")
    opus["schedules"][0]["tiers"][0]["read"] = 0.25  # a read price cut
    cheaper = PriceTable(PriceSnapshot.model_validate(data))
    old = ledger.totals(run_id=run.id)
    preview = ledger.reprice(cheaper, run_id=run.id)
    assert old.cost_usd == pytest.approx(4 * 0.103973)
    assert preview.cost_usd == pytest.approx(4 * (0.103973 - 188086 * 0.25 / 1e6))
    assert ledger.totals(run_id=run.id).cost_usd == pytest.approx(old.cost_usd)  # preview changed nothing
    ledger.reprice(cheaper, run_id=run.id, update=True)
    assert ledger.totals(run_id=run.id).cost_usd == pytest.approx(preview.cost_usd)
    assert {c.price_snapshot_id for c in ledger.calls(run_id=run.id)} == {cheaper.id}
    assert ledger.price_table(cheaper.id).lookup("claude-opus-5").current.tiers[0].read == 0.25


def test_runs_tasks_sessions(ledger: Ledger) -> None:
    run = ledger.start_run("nightly", {"suite": "mini", "workers": 4})
    task = ledger.start_task("fix-bug-1", run.id)
    session = ledger.start_session(run.id, task.id, backend="anthropic", model="claude-opus-5", label="worker-0")
    assert ledger.get_session(session.id) == session
    done = ledger.finish_task(task.id, "passed", {"tests": 12})
    assert done.outcome == "passed" and done.detail == {"tests": 12} and done.finished_at is not None
    finished = ledger.finish_run(run.id)
    assert finished.status == "finished" and finished.config == {"suite": "mini", "workers": 4}
    assert [r.id for r in ledger.runs()] == [run.id]
    assert [t.id for t in ledger.tasks(run.id)] == [task.id]
    assert [s.id for s in ledger.sessions(run.id)] == [session.id]
    with pytest.raises(KeyError, match="no task"):
        ledger.finish_task("missing", "failed")


def test_summaries_match_python_aggregates(ledger: Ledger) -> None:
    run = ledger.start_run("sum")
    task_a = ledger.start_task("a", run.id)
    task_b = ledger.start_task("b", run.id)
    calls = []
    for i in range(6):
        raw = {"input_tokens": 100 + i, "cache_creation_input_tokens": 5000 if i == 0 else 0, "cache_read_input_tokens": 0 if i == 0 else 5000, "output_tokens": 50}
        calls.append(anthropic_call(run_id=run.id, task_id=task_a.id, session_id="sa", started_at=T0 + timedelta(seconds=i), usage=from_anthropic(raw)))
    for i in range(3):
        usage = from_openai_compatible({"prompt_tokens": 800, "completion_tokens": 9}, absent_cached_means_zero=(i == 0))
        calls.append(CallRecord(run_id=run.id, task_id=task_b.id, session_id="sb", backend="vllm", model="local", started_at=T0 + timedelta(seconds=10 + i), usage=usage))
    # An Anthropic-compatible server that reports reads but not writes: its read is known but it
    # cannot enter the Σ-hit ratio, whose denominator needs the whole prompt split.
    partial = from_anthropic({"input_tokens": 10, "cache_read_input_tokens": 700, "output_tokens": 1}, absent_cache_means_zero=False)
    full = from_anthropic({"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 300, "output_tokens": 1})
    for i, usage in enumerate([partial, full]):
        calls.append(CallRecord(run_id=run.id, session_id="sc", backend="proxy", model="claude-opus-5", started_at=T0 + timedelta(seconds=20 + i), usage=usage))
    ledger.record_calls(calls, price_table=TABLE)
    ledger.finish_task(task_a.id, "passed")
    ledger.finish_task(task_b.id, "failed")

    by_session = {g.key: g.totals for g in ledger.summarize("session")}
    stored = ledger.calls()
    for key in ("sa", "sb", "sc"):
        expected = aggregate((c.usage, c.cost_usd) for c in stored if c.session_id == key)
        got = by_session[key]
        assert got.model_dump(exclude={"cost_usd"}) == expected.model_dump(exclude={"cost_usd"})
        assert got.cost_usd == pytest.approx(expected.cost_usd) if expected.cost_usd is not None else got.cost_usd is None

    sa = by_session["sa"]
    assert sa.calls == 6 and sa.cache_read == 25_000 and sa.cache_write_5m == 5_000
    assert sa.hit_ratio == pytest.approx(25_000 / (25_000 + 5_000 + sum(100 + i for i in range(6))))
    assert sa.calls_with_hit_share == pytest.approx(5 / 6)
    expected_cost = sum(cost(c.usage, c.model, c.started_at, TABLE).total for c in calls[:6])  # type: ignore[misc]
    assert sa.cost_usd == pytest.approx(expected_cost)
    sb = by_session["sb"]
    assert sb.unknown == {"fresh_input": 2, "cache_read": 2, "reasoning": 3}
    assert sb.hit_ratio == 0.0 and sb.unpriced_calls == 3 and sb.cost_usd is None

    sc = by_session["sc"]
    assert sc.cache_read == 1000 and sc.hit_ratio == pytest.approx(300 / 400) and sc.calls_with_hit_share == 1.0

    by_task = {g.key: g for g in ledger.summarize("task", run_id=run.id)}
    assert (by_task[task_a.id].label, by_task[task_a.id].outcome) == ("a", "passed")
    assert by_task[task_b.id].outcome == "failed"
    by_model = {g.key: g.totals.calls for g in ledger.summarize("model")}
    assert by_model == {"claude-opus-5": 8, "local": 3}
    (whole_run,) = ledger.summarize("run")
    assert whole_run.key == run.id and whole_run.label == "sum" and whole_run.totals.calls == 11
    assert ledger.totals(run_id=run.id).model_dump(exclude={"cost_usd"}) == aggregate((c.usage, c.cost_usd) for c in stored).model_dump(exclude={"cost_usd"})
    with pytest.raises(ValueError, match="cannot group"):
        ledger.summarize("colour")  # type: ignore[arg-type]


def test_opening_a_version_1_file_migrates_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(str(path), isolation_level=None)
    db = Database(conn)
    migrate(db, target=1)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.execute(
        "INSERT INTO calls (id, backend, model, started_at, fresh_input, cache_read, output, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ("old-call", "anthropic", "claude-opus-5", T0.isoformat(), 10, 90, 5, 0.001),
    )
    conn.execute("INSERT INTO sessions (id, started_at, backend, model) VALUES ('old-session', ?, 'anthropic', 'claude-opus-5')", (T0.isoformat(),))
    assert "layout" not in db["calls"].columns_dict
    conn.close()

    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION == 8
        assert {"layout", "cache_mode"} <= set(ledger.db["calls"].columns_dict)
        # v4: sessions say where they worked and on which spec; older ones do not know, and have no transcript.
        old_session = ledger.get_session("old-session")
        assert old_session.workspace is None and old_session.model_spec is None
        assert ledger.messages("old-session") == [] and ledger.sessions(with_messages=True) == []
        (old,) = ledger.calls()
        assert old.id == "old-call" and old.usage.cache_read == 90 and old.layout is None and old.cost_usd == 0.001
        assert old.kind is None  # v5: calls recorded before warm-ups were tagged are ordinary calls
        # v6: older calls have no flags and no server-tool counts (unknown, not zero).
        assert old.usage.flags == () and old.usage.web_search_requests is None and old.usage.speed is None
        # v7: older calls were one attempt each, and done.
        assert old.attempt == 1 and old.retry_of is None and old.state == "done"
        assert old.usage.service_tier is None  # v8: the tier was not recorded then
        indexes = {tuple(i.columns) for i in ledger.db["calls"].indexes}
        assert ("session_id",) in indexes and ("run_id",) in indexes
        ledger.record_call(anthropic_call(layout="naive", cache_mode="warm"))
        assert ledger.count_calls() == 2


@pytest.mark.parametrize("had_tier", [False, True], ids=["version-6-without-tier", "version-6-with-tier"])
def test_a_version_6_file_gets_the_service_tier_column_once(tmp_path: Path, had_tier: bool) -> None:
    # Version-6 files exist with and without `service_tier` (releases between them added it in the
    # version-6 step); both open, and both can record a call that names its tier.
    path = tmp_path / "v6.db"
    conn = sqlite3.connect(str(path), isolation_level=None)
    db = Database(conn)
    migrate(db, target=6)
    assert "service_tier" not in db["calls"].columns_dict
    if had_tier:
        db["calls"].add_column("service_tier", str)
    conn.close()
    with Ledger(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert "service_tier" in ledger.db["calls"].columns_dict
        call = anthropic_call()
        call = call.model_copy(update={"usage": call.usage.model_copy(update={"service_tier": "batch"})})
        ledger.record_call(call)
        (stored,) = ledger.calls()
        assert stored.usage.service_tier == "batch"


def test_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with Ledger(path):
        pass
    conn = sqlite3.connect(str(path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerVersionError, match="newer"):
        Ledger(path)


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HITRATE_DB", raising=False)
    assert default_ledger_path() == Path(platformdirs.user_data_dir("hitrate", appauthor=False)) / "ledger.db"
    monkeypatch.setenv("HITRATE_DB", str(tmp_path / "elsewhere" / "l.db"))
    assert default_ledger_path() == tmp_path / "elsewhere" / "l.db"
    with Ledger() as ledger:
        assert ledger.path == tmp_path / "elsewhere" / "l.db" and ledger.path.exists()


def test_ids_are_unique_and_time_ordered() -> None:
    ids = [new_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and i[12] == "7" for i in ids)
    assert ids[0][:12] <= ids[-1][:12]


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        CallRecord(backend="x", model="y", started_at=datetime(2026, 1, 1))
