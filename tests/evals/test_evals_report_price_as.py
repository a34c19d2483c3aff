"""`hitrate report --price-as MODEL`: every call re-priced at one model's rates, labelled as such
everywhere it shows, and the ledger left as it was."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import typer
from typer.testing import CliRunner

from hitrate.evals.commands.report import register
from hitrate.evals.plots import report_figures
from hitrate.evals.report import ReportError, build_report
from hitrate.evals.report_render import html, tables
from hitrate.store.cost import cost
from hitrate.store.ledger import Ledger
from hitrate.store.prices import PriceTable
from hitrate.store.records import CallRecord
from hitrate.store.usage import Usage

from test_evals_report import populate, usage
from whatif_builders import T0

MODEL = "claude-sonnet-5"


def add_local_run(ledger: Ledger, run_id: str = "run-local") -> list[CallRecord]:
    """A run on the bundled engine: token buckets recorded, no price (the table has no local model)."""
    run = ledger.start_run("local", {"model": "local/tiny", "layout": "cache-aware", "cache_mode": "cold", "tries": 1}, run_id=run_id)
    recorded = []
    for t, outcome in enumerate(("pass", "pass", "fail")):
        task = ledger.start_task(f"task-{t}", run.id)
        calls = [
            (usage(0, 4_000, 4, output=40), "cold", 4_000),
            (usage(4_000, 300, 4, output=30), None, 0),
            (usage(3_000, 0, 1_300, output=20), "prefix_changed(system, line 29)", 1_300),
        ]
        for i, (u, reason, missed) in enumerate(calls):
            recorded.append(
                ledger.record_call(
                    CallRecord(
                        run_id=run.id, task_id=task.id, backend="local", model="local/tiny",
                        started_at=T0 + timedelta(minutes=t, seconds=i), usage=u,
                        miss_reason=reason, miss_tokens=missed, miss_cost_usd=None,
                    ),
                    price_table=PriceTable.default(),
                )
            )  # fmt: skip
        ledger.finish_task(task.id, outcome, finished_at=task.started_at + timedelta(seconds=5))
    return recorded


@pytest.fixture
def ledger_path(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        populate(ledger)
        add_local_run(ledger)
    return path


def _rows(path):
    with Ledger(path) as ledger:
        return [(c.id, c.cost_usd, c.miss_cost_usd, c.price_snapshot_id) for c in ledger.calls()]


def test_local_runs_are_unpriced_without_price_as(ledger_path):
    with Ledger(ledger_path) as ledger:
        (b,) = build_report(ledger, ["run-local"]).blocks
    assert b.total_cost_usd is None and b.cost_per_passed_task_usd is None and b.unpriced_calls == 9


def test_price_as_prices_every_call_at_the_model_rates_in_the_report_only(ledger_path):
    before = _rows(ledger_path)
    with Ledger(ledger_path) as ledger:
        calls = ledger.calls(run_id="run-local")
        report = build_report(ledger, ["run-local"], price_as=MODEL)
    (b,) = report.blocks
    expected = [cost(c.usage, MODEL, c.started_at).total for c in calls]
    assert None not in expected
    assert b.unpriced_calls == 0
    assert b.total_cost_usd == pytest.approx(sum(expected))
    assert b.cost_per_task_usd == pytest.approx(sum(expected) / 3)
    assert b.cost_per_passed_task_usd == pytest.approx(sum(expected) / 2)
    assert [t.cost_usd for t in b.tasks] == pytest.approx([sum(expected[i : i + 3]) for i in (0, 3, 6)])
    # Misses re-priced as the session prices them: written tokens paid at the write rate instead of
    # the read rate ($2.50 vs $0.20 per 1M), fresh ones at the input rate ($2 vs $0.20).
    misses = {r.reason: r for r in b.miss_reasons}
    assert misses["cold"].cost_usd == pytest.approx(3 * 4_000 * (2.5 - 0.2) / 1e6)
    assert misses["prefix_changed"].cost_usd == pytest.approx(3 * 1_300 * (2.0 - 0.2) / 1e6)
    assert "hit" not in misses and b.hit_calls > 0
    assert report.priced_as is not None and report.priced_as.model == MODEL
    assert report.priced_as.price_snapshot_id == PriceTable.default().id and report.priced_as.unpriced_calls == 0
    assert report.price_label == f"priced as {MODEL}"
    assert _rows(ledger_path) == before  # nothing written back


def test_price_as_replaces_recorded_prices_too(ledger_path):
    with Ledger(ledger_path) as ledger:
        recorded = build_report(ledger, ["run-cold"]).blocks[0]
        calls = ledger.calls(run_id="run-cold")
        repriced = build_report(ledger, ["run-cold"], price_as=MODEL).blocks[0]
    assert repriced.total_cost_usd == pytest.approx(sum(cost(c.usage, MODEL, c.started_at).total for c in calls))
    assert repriced.total_cost_usd != pytest.approx(recorded.total_cost_usd)


def test_price_as_resolves_aliases_and_refuses_unknown_models(ledger_path):
    with Ledger(ledger_path) as ledger:
        report = build_report(ledger, ["run-local"], price_as=f"anthropic/{MODEL}")
        assert report.priced_as.model == MODEL and report.priced_as.requested == f"anthropic/{MODEL}"
        with pytest.raises(ReportError, match="cannot price as 'claude-sonet-5'.*closest known"):
            build_report(ledger, ["run-local"], price_as="claude-sonet-5")


def test_calls_with_an_unreported_bucket_stay_unpriced_and_say_why(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        run = ledger.start_run("x", {"model": "local/tiny", "layout": "naive", "cache_mode": "cold"}, run_id="r")
        task = ledger.start_task("a", run.id)
        for u in (usage(0, 0, 100), Usage(fresh_input=100, cache_read=0, output=5)):
            ledger.record_call(CallRecord(run_id=run.id, task_id=task.id, backend="local", model="local/tiny", started_at=T0, usage=u))
        ledger.finish_task(task.id, "pass")
        report = build_report(ledger, ["r"], price_as=MODEL)
    (b,) = report.blocks
    assert b.unpriced_calls == 1 and b.total_cost_usd == pytest.approx(cost(usage(0, 0, 100), MODEL, T0).total)
    assert report.priced_as.unpriced_calls == 1
    assert any("cache_write_5m tokens unknown" in r for r in report.priced_as.unpriced_reasons)
    assert "1 call(s) stayed unpriced" in html(report)


def test_price_as_is_labelled_in_tables_html_and_pictures(ledger_path):
    with Ledger(ledger_path) as ledger:
        report = build_report(ledger, ["run-local", "run-naive"], price_as=MODEL, trajectory_task="task-0")
    label = f"priced as {MODEL}"
    text = [str(r) for r in tables(report).renderables if not hasattr(r, "columns")]
    assert label in text[0] and any("the ledger keeps its own costs" in t for t in text)
    page = html(report)
    assert f"<h1>Eval report <small>({label})</small></h1>" in page
    assert page.count(label) >= 5  # title, heading, note, summary, miss reasons, tasks
    figures = report_figures(report)
    # The task's calls in each of the two runs' blocks.
    assert [stem for stem, _, _ in figures] == ["cost_per_passed_task_vs_pass_rate", "calls_per_task", "calls_per_task_2"]
    for _, caption, fig in figures:
        titles = fig.axes[0].get_title() + (fig._suptitle.get_text() if fig._suptitle else "")
        assert label in caption and label in titles
    scatter = figures[0][2].axes[0]
    assert label in scatter.get_xlabel()
    assert len(scatter.containers) == 2  # the local run now has a cost per passed task: it is placed
    assert label in figures[1][2].axes[0].child_axes[0].get_xlabel()  # running cost scale


def test_unpriced_report_says_nothing_about_pricing(ledger_path):
    with Ledger(ledger_path) as ledger:
        report = build_report(ledger, ["run-cold"])
    assert report.priced_as is None and report.price_label is None
    assert "priced as" not in html(report)
    assert all("priced as" not in caption for _, caption, _ in report_figures(report))


def run_cli(*args):
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_cli_price_as(ledger_path, tmp_path):
    before = _rows(ledger_path)
    result = run_cli("report", "run-local", "--db", str(ledger_path), "--price-as", MODEL)
    assert result.exit_code == 0, result.output
    assert f"costs priced as {MODEL}" in result.output and "unknown price" not in result.output
    out = tmp_path / "r.json"
    pics = tmp_path / "pics"
    result = run_cli("report", "run-local", "--db", str(ledger_path), "--price-as", MODEL, "-f", "json", "-o", str(out), "--pictures", str(pics))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["priced_as"]["model"] == MODEL and data["blocks"][0]["total_cost_usd"] > 0
    assert len(list(pics.iterdir())) == 4
    result = run_cli("report", "run-local", "--db", str(ledger_path), "--price-as", "no-such-model")
    assert result.exit_code == 2 and "cannot price as 'no-such-model'" in result.output
    assert _rows(ledger_path) == before
