"""pass@1 and pass@2 reported apart for runs that give a task two tries."""

from __future__ import annotations

import io
import json

import pytest
from evals_task_factory import FIXED, write_task
from runner_fakes import FakeRoutes, PrefixCacheBackend

from hitrate.evals.pass_at import pass_at_k, pass_try
from hitrate.evals.report import build_report
from hitrate.evals.report_render import html, tables
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.stats import wilson_interval
from hitrate.store.ledger import Ledger
from rich.console import Console

from test_evals_report import add_task, usage


def text_of(report) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(tables(report))
    return console.export_text()


def call():
    return (usage(0, 0, 100), 0.01, 0.2, None, 0, 0.0)


def two_try_run(ledger, run_id="r2"):
    run = ledger.start_run("two tries", {"model": "m", "layout": "cache-aware", "cache_mode": "cold", "tries": 2}, run_id=run_id)
    resolved = lambda *flags: [{"try": i, "resolved": f} for i, f in enumerate(flags, start=1)]  # noqa: E731
    add_task(ledger, run.id, "first", "pass", [call()], detail={"pass_try": 1, "tries": resolved(True)})
    add_task(ledger, run.id, "second", "pass", [call(), call()], detail={"pass_try": 2, "tries": resolved(False, True)})
    add_task(ledger, run.id, "from-tries", "pass", [call(), call()], detail={"tries": resolved(False, True)})
    add_task(ledger, run.id, "never", "fail", [call(), call()], detail={"tries": resolved(False, False)})
    add_task(ledger, run.id, "broken", "infra_error", [call()], detail={})
    return run


def test_pass_at_1_and_2_over_the_scored_tasks(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        two_try_run(ledger)
        (b,) = build_report(ledger, ["r2"]).blocks
    assert b.max_tries == 2 and b.n_scored == 4 and b.n_passed == 3 and b.pass_try_unknown == 0
    assert [(r.k, r.n_passed) for r in b.pass_at] == [(1, 1), (2, 3)]
    assert b.pass_at[0].rate == pytest.approx(1 / 4) and b.pass_at[0].ci95 == pytest.approx(wilson_interval(1, 4))
    assert b.pass_at[1].rate == pytest.approx(b.pass_rate)


def test_pass_at_is_in_the_table_html_and_json(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        two_try_run(ledger)
        report = build_report(ledger, ["r2"])
    text = text_of(report)
    assert "pass@1 [95% CI]" in text and "pass@2 [95% CI]" in text
    assert "1 · 25.0%" in text and "3 · 75.0%" in text
    page = html(report)
    assert "<h2>pass@k</h2>" in page and "pass@2 [95% CI]" in page and "3 · 75.0%" in page
    data = json.loads(report.model_dump_json())
    assert [row["n_passed"] for row in data["blocks"][0]["pass_at"]] == [1, 3]


def test_single_try_runs_show_no_pass_at_k(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        run = ledger.start_run("one try", {"model": "m", "layout": "naive", "cache_mode": "cold", "tries": 1}, run_id="r1")
        add_task(ledger, run.id, "a", "pass", [call()], detail={"pass_try": 1})
        report = build_report(ledger, ["r1"])
    assert report.blocks[0].pass_at == [] and report.blocks[0].max_tries == 1
    assert "pass@" not in text_of(report) and "pass@" not in html(report)


def test_passing_try_falls_back_to_the_recorded_tries_or_counts_as_unknown(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        run = ledger.start_run("x", {"tries": 2}, run_id="r")
        known = add_task(ledger, run.id, "a", "pass", [call()], detail={"tries": [{"resolved": False}, {"resolved": True}]})
        unknown = add_task(ledger, run.id, "b", "pass", [call()], detail={})
        assert pass_try(ledger.get_task(known.id)) == 2 and pass_try(ledger.get_task(unknown.id)) is None
        report = build_report(ledger, ["r"])
    (b,) = report.blocks
    assert [r.n_passed for r in b.pass_at] == [0, 2] and b.pass_try_unknown == 1
    assert "1 passing try unknown" in text_of(report)


def test_pass_at_k_counts():
    rows, unknown = pass_at_k([1, 2, 2, None, 5], n_scored=8, max_tries=3)
    assert [r.n_passed for r in rows] == [1, 3, 5] and unknown == 1
    assert pass_at_k([], n_scored=0, max_tries=2)[0][0].rate is None


def test_a_real_two_try_run_reports_pass_at_1_and_2(tmp_path):
    suite = tmp_path / "suite"
    for name in ("a-first-try", "b-second-try", "c-never"):
        write_task(suite, name)
    fix = {"text": "Fixing.", "tool_calls": [("write_file", json.dumps({"path": "mathx.py", "content": FIXED}))]}
    backend = PrefixCacheBackend(
        replies=[
            fix, {"text": "Done."},  # a: passes on the first try
            {"text": "Looks fine."}, fix, {"text": "Fixed."},  # b: fails, sees the test output, passes
            {"text": "Looks fine."}, {"text": "Still fine."},  # c: fails both tries
        ]
    )  # fmt: skip
    settings = EvalSettings(suite=str(suite), model="openai-compat/fake@http://127.0.0.1:9/v1", policy="model", tries=2)
    db = tmp_path / "e.db"
    result = run_eval(settings, db_path=db, routes=FakeRoutes(backend))
    assert {r.name: (r.outcome, r.pass_try) for r in result.results} == {
        "a-first-try": ("pass", 1), "b-second-try": ("pass", 2), "c-never": ("fail", None),
    }  # fmt: skip
    with Ledger(db) as ledger:
        (b,) = build_report(ledger, [result.run_id]).blocks
    assert b.max_tries == 2 and b.n_scored == 3
    assert [(r.k, r.n_passed) for r in b.pass_at] == [(1, 1), (2, 2)]
