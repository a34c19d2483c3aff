"""`hitrate report --leaderboard`: runs side by side, ranked, exported, other task sets not comparable."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import typer
from runner_fakes import FakeRoutes, PrefixCacheBackend
from typer.testing import CliRunner

from hitrate.evals.commands import report as cli_report
from hitrate.evals.leaderboard import SCHEMA_VERSION, LeaderboardRow, load_leaderboard, task_set_digest, to_csv
from hitrate.evals.report import load_report
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.task import bundled_suite_path

PAIR = ["lru-recency", "roman-parse"]
MODEL = "openai-compat/fake@http://127.0.0.1:9/v1"
PRICE_AS = "claude-sonnet-5"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """Four runs: the pair replayed with both layouts, the pair with a model that only talks (so it
    fails), and one task alone (another task set)."""
    db = tmp_path_factory.mktemp("board") / "runs.db"
    suite = str(bundled_suite_path())
    runs = {}
    for name, overrides in (
        ("aware", {"policy": "replay", "task_ids": PAIR}),
        ("naive", {"policy": "replay", "task_ids": PAIR, "layout": "naive"}),
        ("talker", {"policy": "model", "task_ids": PAIR}),
        ("alone", {"policy": "replay", "task_ids": ["roman-parse"]}),
    ):
        settings = EvalSettings(suite=suite, model=MODEL, **overrides)
        runs[name] = run_eval(settings, db_path=db, workers=2, routes=FakeRoutes(PrefixCacheBackend())).run_id
    return db, runs


def test_rows_rank_by_pass_rate_then_cost_and_other_task_sets_are_not_comparable(ledger):
    db, runs = ledger
    board = load_leaderboard(db, None, price_as=PRICE_AS)  # no ids: every eval run of the ledger
    assert board.schema_version == SCHEMA_VERSION and board.priced_as == f"priced as {PRICE_AS}"
    by_run = {r.run_id: r for r in board.rows}
    assert set(by_run) == set(runs.values())
    assert board.reference_task_set == task_set_digest(PAIR)
    alone = by_run[runs["alone"]]
    assert not alone.comparable and alone.rank is None and board.rows[-1] is alone
    aware, naive, talker = by_run[runs["aware"]], by_run[runs["naive"]], by_run[runs["talker"]]
    assert (aware.pass_rate, naive.pass_rate, talker.pass_rate) == (1.0, 1.0, 0.0)
    # Same pass rate: the cheaper per passed task ranks first (the cache-aware layout reads more).
    assert aware.cost_per_passed_task_usd < naive.cost_per_passed_task_usd
    assert [r.run_id for r in board.rows[:3]] == [runs["aware"], runs["naive"], runs["talker"]]
    assert [r.rank for r in board.rows] == [1, 2, 3, None]
    assert talker.cost_per_passed_task_usd is None and talker.n_passed == 0 and talker.policy == "model"
    assert (aware.layout, naive.layout, aware.cache_mode, aware.policy) == ("cache-aware", "naive", "cold", "replay")
    # Every figure is the run's own report's.
    block = load_report(db, [runs["naive"]], price_as=PRICE_AS).blocks[0]
    assert naive.pass_rate_ci95_low == block.pass_rate_ci95[0] and naive.pass_rate_ci95_high == block.pass_rate_ci95[1]
    assert naive.total_cost_usd == block.total_cost_usd and naive.hit_ratio == block.tokens.hit_ratio
    assert naive.wall_p50_s == block.task_wall_s.p50 and naive.n_tasks == 2 and naive.suite == "basic"


def test_csv_and_json_follow_the_documented_schema(ledger):
    db, runs = ledger
    board = load_leaderboard(db, [runs["aware"], runs["alone"]])
    rows = list(csv.DictReader(io.StringIO(to_csv(board))))
    assert list(rows[0]) == list(LeaderboardRow.model_fields)
    # One run on each task set: the first run named sets the reference.
    assert [(r["run_id"], r["comparable"], r["rank"]) for r in rows] == [(runs["aware"], "true", "1"), (runs["alone"], "false", "")]
    assert json.loads(board.model_dump_json())["rows"][1]["comparable"] is False
    # Unpriced runs leave the money columns empty, never 0.
    assert rows[0]["total_cost_usd"] == "" and rows[0]["cost_per_passed_task_usd"] == ""
    documented = (Path(__file__).resolve().parents[2] / "docs" / "leaderboard.md").read_text()
    for field in LeaderboardRow.model_fields:
        assert f"`{field}`" in documented, field


def test_leaderboard_cli(ledger):
    db, runs = ledger
    app = typer.Typer()
    cli_report.register(app)
    app.command("noop")(lambda: None)
    table = CliRunner().invoke(app, ["report", "--leaderboard", "--db", str(db), "--price-as", PRICE_AS])
    assert table.exit_code == 0, table.output
    assert "leaderboard; costs priced as claude-sonnet-5" in table.output and "≠ not comparable" in table.output
    out = CliRunner().invoke(app, ["report", runs["aware"], runs["talker"], "--leaderboard", "--db", str(db), "-f", "json"])
    assert out.exit_code == 0 and [r["run_id"] for r in json.loads(out.output)["rows"]] == [runs["aware"], runs["talker"]]
    bad = CliRunner().invoke(app, ["report", "--leaderboard", "--db", str(db), "-f", "html"])
    assert bad.exit_code == 2 and "table, json, csv" in bad.output
    none = CliRunner().invoke(app, ["report", "--db", str(db)])
    assert none.exit_code == 2 and "name at least one run id" in none.output
