"""The eval report over a ledger file populated through the store's Ledger API."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from hitrate.evals.report import ReportError, build_report, miss_histogram, normalize_outcome
from hitrate.evals.stats import percentile, wilson_interval
from hitrate.store.ledger import Ledger
from hitrate.store.records import CallRecord
from hitrate.store.usage import Usage

from whatif_builders import T0


def usage(read: int, write: int, fresh: int, output: int = 100) -> Usage:
    return Usage(fresh_input=fresh, cache_write_5m=write, cache_write_30m=0, cache_write_1h=0, cache_write_12h=0, cache_read=read, output=output)


def add_task(ledger, run_id, name, outcome, calls, *, wall_s=10.0, start=T0, detail=None):
    """calls: list of (usage, cost, ttft, miss_reason, miss_tokens, miss_cost)."""
    task = ledger.start_task(name, run_id, detail=detail)
    for i, (u, c, ttft, reason, mtok, mcost) in enumerate(calls):
        ledger.record_call(
            CallRecord(
                run_id=run_id, task_id=task.id, backend="anthropic", model="claude-sonnet-4-6",
                started_at=start + timedelta(seconds=i), ttft_s=ttft, usage=u, cost_usd=c,
                miss_reason=reason, miss_tokens=mtok, miss_cost_usd=mcost,
            )
        )
    if outcome is not None:
        ledger.finish_task(task.id, outcome, finished_at=task.started_at + timedelta(seconds=wall_s))
    return task


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "ledger.db") as led:
        yield led


def populate(ledger):
    """Three runs: cache-aware cold, cache-aware warm, naive cold."""
    cold = ledger.start_run("cold", {"model": "claude-sonnet-4-6", "layout": "cache-aware", "cache_mode": "cold"}, run_id="run-cold")
    outcomes = ["pass"] * 6 + ["fail", "failed", "infra_error", "timeout"]
    for i, outcome in enumerate(outcomes):
        calls = [
            (usage(0, 10_000, 500), 0.04, 1.0 + i, "cold", 10_000, 0.03),
            (usage(10_000, 800, 200), 0.01, 0.5, None, 0, 0.0),
            (usage(0, 11_000, 100), 0.05, 0.7, "ttl_expired", 11_000, 0.04) if i % 2 else (usage(10_800, 300, 100), 0.006, 0.4, None, 0, 0.0),
        ]
        add_task(ledger, cold.id, f"task-{i}", outcome, calls, wall_s=10.0 * (i + 1))
    warm = ledger.start_run("warm", {"model": "claude-sonnet-4-6", "layout": "cache_aware", "cache_mode": "warm"}, run_id="run-warm")
    for i in range(4):
        add_task(ledger, warm.id, f"task-{i}", "passed" if i < 3 else "agent_error", [(usage(10_000, 500, 200), 0.008, 0.3, None, 0, 0.0)])
    naive = ledger.start_run("naive", {"model": "claude-sonnet-4-6", "layout": "naive", "cache_mode": "cold"}, run_id="run-naive")
    for i in range(4):
        add_task(
            ledger, naive.id, f"task-{i}", "pass" if i < 2 else "fail",
            [(usage(0, 0, 11_000), 0.033, 0.9, "prefix_changed(system, line 2)", 11_000, 0.03)] * 3,
        )
    return cold, warm, naive


def block(report, layout, cache_mode):
    return next(b for b in report.blocks if b.key.layout == layout and b.key.cache_mode == cache_mode)


def test_blocks_keep_cold_warm_and_layouts_apart(ledger):
    populate(ledger)
    report = build_report(ledger, ["run-cold", "run-warm", "run-naive"])
    assert [b.key.label for b in report.blocks] == [
        "claude-sonnet-4-6 · cache-aware · cold",
        "claude-sonnet-4-6 · cache-aware · warm",
        "claude-sonnet-4-6 · naive · cold",
    ]
    assert [b.run_ids for b in report.blocks] == [["run-cold"], ["run-warm"], ["run-naive"]]


def test_pass_rate_leaves_infra_errors_out_and_has_a_wilson_interval(ledger):
    populate(ledger)
    b = block(build_report(ledger, ["run-cold"]), "cache-aware", "cold")
    assert b.n_tasks == 10 and b.n_scored == 9 and b.n_passed == 6
    assert b.outcomes == {"pass": 6, "fail": 2, "timeout": 1, "infra_error": 1}
    assert b.pass_rate == pytest.approx(6 / 9)
    assert b.pass_rate_ci95 == pytest.approx(wilson_interval(6, 9))
    low, high = b.pass_rate_ci95
    assert low < 6 / 9 < high


def test_costs_per_task_and_per_passed_task(ledger):
    populate(ledger)
    b = block(build_report(ledger, ["run-cold"]), "cache-aware", "cold")
    # Every task costs 0.04 + 0.01, plus 0.05 (odd) or 0.006 (even); the infra-error task's money counts too.
    expected = sum(0.05 + (0.05 if i % 2 else 0.006) for i in range(10))
    assert b.total_cost_usd == pytest.approx(expected)
    assert b.cost_per_task_usd == pytest.approx(expected / 9)
    assert b.cost_per_passed_task_usd == pytest.approx(expected / 6)


def test_tokens_hit_ratio_is_sum_based_and_hit_share_is_apart(ledger):
    populate(ledger)
    b = block(build_report(ledger, ["run-cold"]), "cache-aware", "cold")
    reads = 10 * 10_000 + 5 * 10_800
    prompt = 10 * (10_500 + 11_000) + 5 * 11_100 + 5 * 11_200
    assert b.tokens.cache_read == reads and b.tokens.calls == 30
    assert b.tokens.hit_ratio == pytest.approx(reads / prompt)
    assert b.tokens.calls_with_hit_share == pytest.approx(15 / 30)


def test_miss_reason_histogram(ledger):
    populate(ledger)
    report = build_report(ledger, ["run-cold", "run-naive"])
    cold = {r.reason: r for r in block(report, "cache-aware", "cold").miss_reasons}
    assert cold["cold"].calls == 10 and cold["cold"].tokens == 100_000 and cold["cold"].cost_usd == pytest.approx(0.3)
    assert cold["ttl_expired"].calls == 5
    assert "hit" not in cold and block(report, "cache-aware", "cold").hit_calls == 15
    naive = block(report, "naive", "cold").miss_reasons
    assert [(r.reason, r.calls) for r in naive] == [("prefix_changed", 12)]
    assert naive[0].examples == ["prefix_changed(system, line 2)"]


def test_wall_time_and_ttft_percentiles(ledger):
    populate(ledger)
    b = block(build_report(ledger, ["run-cold"]), "cache-aware", "cold")
    walls = [10.0 * (i + 1) for i in range(10)]
    assert b.task_wall_s.p50 == pytest.approx(55.0) and b.task_wall_s.p90 == pytest.approx(percentile(walls, 90)) == pytest.approx(91.0)
    ttfts = [1.0 + i for i in range(10)] + [0.5] * 10 + [0.7 if i % 2 else 0.4 for i in range(10)]
    assert b.ttft_s.n == 30
    assert b.ttft_s.p50 == pytest.approx(percentile(ttfts, 50))
    assert b.ttft_s.p90 == pytest.approx(percentile(ttfts, 90))


def test_no_passed_task_gives_no_cost_per_passed_task(ledger):
    run = ledger.start_run("x", {"model": "m", "layout": "naive", "cache_mode": "cold"}, run_id="r")
    add_task(ledger, run.id, "a", "fail", [(usage(0, 0, 100), 0.01, 0.2, None, 0, 0.0)])
    add_task(ledger, run.id, "b", None, [(usage(0, 0, 100), 0.01, 0.2, None, 0, 0.0)])
    b = build_report(ledger, ["r"]).blocks[0]
    assert b.n_scored == 1 and b.outcomes == {"fail": 1, "unfinished": 1}
    assert b.cost_per_passed_task_usd is None and b.pass_rate == 0.0
    assert b.pass_rate_ci95 == pytest.approx(wilson_interval(0, 1))


def test_unpriced_calls_leave_cost_unknown_not_zero(ledger):
    run = ledger.start_run("local", {"model": "tiny", "layout": "cache-aware", "cache_mode": "warm"}, run_id="r")
    add_task(ledger, run.id, "a", "pass", [(usage(50, 0, 10), None, 0.1, None, 0, None)])
    b = build_report(ledger, ["r"]).blocks[0]
    assert b.total_cost_usd is None and b.cost_per_passed_task_usd is None and b.unpriced_calls == 1


def test_configuration_falls_back_to_the_calls_tags(ledger):
    run = ledger.start_run("untagged", run_id="r")
    task = ledger.start_task("a", run.id)
    for mode in ("warm", "warm", "cold"):
        ledger.record_call(
            CallRecord(run_id=run.id, task_id=task.id, backend="openai", model="gpt-4.1", started_at=T0, usage=usage(0, 0, 5), layout="cache_aware", cache_mode=mode)
        )
    ledger.finish_task(task.id, "pass")
    key = build_report(ledger, ["r"]).blocks[0].key
    assert (key.model, key.layout, key.cache_mode) == ("gpt-4.1", "cache-aware", "warm")


def test_trajectory_defaults_to_the_busiest_task_and_can_be_chosen(ledger):
    populate(ledger)
    report = build_report(ledger, ["run-cold"])
    assert report.trajectory is not None and len(report.trajectory.calls) == 3
    chosen = build_report(ledger, ["run-cold", "run-naive"], trajectory_task="task-3")
    assert chosen.trajectory.task_name == "task-3"
    assert [c.miss_reason for c in chosen.trajectory.calls] == ["cold", None, "ttl_expired"]
    with pytest.raises(ReportError, match="no task 'nope'"):
        build_report(ledger, ["run-cold"], trajectory_task="nope")


def test_unknown_run_is_a_clear_error(ledger):
    populate(ledger)
    with pytest.raises(ReportError, match="no run 'missing'.*run-cold"):
        build_report(ledger, ["missing"])


def test_outcome_spellings():
    assert [normalize_outcome(o) for o in ("passed", "FAIL", "error", "infra-error", None, "timeout")] == [
        "pass", "fail", "agent_error", "infra_error", "unfinished", "timeout",
    ]


def test_report_json_round_trips(ledger):
    populate(ledger)
    report = build_report(ledger, ["run-cold", "run-warm"])
    data = json.loads(report.model_dump_json())
    assert data["blocks"][0]["cost_per_passed_task_usd"] == pytest.approx(report.blocks[0].cost_per_passed_task_usd)
    assert type(report).model_validate(data) == report


def test_miss_histogram_orders_by_calls():
    calls = [
        CallRecord(backend="x", model="m", started_at=T0, miss_reason=r, usage=usage(0, 0, 1))
        for r in ["cold", "ttl_expired", "ttl_expired", "lookback_exceeded(history[3])"]
    ]
    assert [(r.reason, r.calls) for r in miss_histogram(calls)] == [("ttl_expired", 2), ("cold", 1), ("lookback_exceeded", 1)]


def test_replayed_runs_never_share_a_block_with_model_runs(ledger):
    populate(ledger)
    replay = ledger.start_run("replay", {"model": "claude-sonnet-4-6", "layout": "cache_aware", "cache_mode": "cold",
                                         "policy": "replay"}, run_id="run-replay")
    add_task(ledger, replay.id, "task-0", "pass", [(usage(0, 0, 11_000), 0.033, 0.9, None, 0, 0.0)])
    report = build_report(ledger, ["run-cold", "run-replay"])
    labels = [b.key.label for b in report.blocks]
    assert labels == ["claude-sonnet-4-6 · cache-aware · cold", "claude-sonnet-4-6 · cache-aware · cold · replay"]
    assert [b.run_ids for b in report.blocks] == [["run-cold"], ["run-replay"]]


def test_labels_of_self_hosted_servers_keep_the_model_and_host():
    from hitrate.evals.report import ConfigKey

    key = ConfigKey(model="openai-compat/qwen2.5-coder@http://10.0.0.5:8000/v1", layout="naive", cache_mode="cold")
    assert key.label == "openai-compat/qwen2.5-coder@10.0.0.5:8000 · naive · cold"
    assert ConfigKey(model="local//srv/models/qwen").label.startswith("local/qwen · ")
