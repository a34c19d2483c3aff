"""The runner end to end on the bundled engine with a tiny random-weight model: real projection,
Anthropic adapter, engine prefix cache, ledger and hidden tests; the reference sequences replayed."""

from __future__ import annotations

import io

import pytest
import typer
from typer.testing import CliRunner

from hitrate.evals.commands import eval as cli_eval
from hitrate.evals.commands import merge as cli_merge
from hitrate.evals.demo import BANNER, ILLUSTRATION_MODEL, run_demo
from hitrate.evals.report import build_report
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings, RouterRoutes
from hitrate.evals.task import bundled_suite_path
from hitrate.harness.demo import ensure_demo_model
from hitrate.harness.local_backend import LocalEngineServer
from hitrate.store.ledger import Ledger

TASKS = ["roman-parse", "lru-recency"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return ensure_demo_model(tmp_path_factory.mktemp("demo-model"))


@pytest.fixture(scope="module")
def engine(model_dir):
    server = LocalEngineServer(str(model_dir))
    server.start()
    yield server
    server.stop()


def _settings(model_dir, **overrides) -> EvalSettings:
    base = {"suite": str(bundled_suite_path()), "model": f"local/{model_dir}", "policy": "replay", "task_ids": TASKS}
    return EvalSettings(**{**base, **overrides})


@pytest.mark.slow
def test_cache_aware_and_naive_on_the_engine(tmp_path, model_dir, engine):
    db = tmp_path / "ab.db"
    routes = RouterRoutes(f"local/{model_dir}", env={}, server=engine)
    aware = run_eval(_settings(model_dir), db_path=db, workers=2, routes=routes)
    naive = run_eval(_settings(model_dir, layout="naive"), db_path=db, workers=2, routes=routes)
    assert engine.metrics() and routes.server is engine  # one shared server, still up
    for run in (aware, naive):
        assert run.status == "finished" and [r.outcome for r in run.results] == ["pass", "pass"]
    with Ledger(db) as ledger:
        a_calls, n_calls = ledger.calls(run_id=aware.run_id), ledger.calls(run_id=naive.run_id)
        report = build_report(ledger, [aware.run_id, naive.run_id])
    assert len(a_calls) == len(n_calls)  # the same tool-call sequences
    assert all(c.backend == "local" and c.error is None for c in a_calls + n_calls)
    a_read = sum(c.usage.cache_read for c in a_calls)
    n_read = sum(c.usage.cache_read for c in n_calls)
    # The naive layout still reads the static system template ahead of its per-request
    # environment block (about 1.2k tokens with the default prompt), so the gap is about 2.3x.
    assert a_read > 2 * n_read
    assert sum(c.usage.cache_write_total for c in n_calls) == 0  # no marks, nothing pinned
    assert all(c.miss_reason is None for c in a_calls[1:] if c.task_id == a_calls[0].task_id)
    assert any((c.miss_reason or "").startswith("prefix_changed(system") for c in n_calls)
    # Each session's first call is cold, even where the engine read its opening bytes (the chat
    # template ahead of the nonce / volatile system prompt) from another session's entry; where a
    # task of the same run (same nonce) already wrote the whole shared head, it is a hit from
    # outside the session. Which of the two depends on how the two workers interleave.
    firsts = [next(c for c in calls if c.session_id == s) for calls in (a_calls, n_calls) for s in {c.session_id for c in calls}]
    assert len(firsts) == 4 and any(c.usage.cache_read for c in firsts)
    for c in firsts:
        assert c.miss_reason in ("cold", None), c.miss_reason
        if c.miss_reason == "cold":
            assert c.miss_tokens == c.usage.prompt_tokens - c.usage.cache_read
    assert all(c.miss_reason == "cold" for c in firsts if c.layout == "naive")  # its head changes every request
    layouts = {b.key.layout: b for b in report.blocks}
    assert set(layouts) == {"cache-aware", "naive"} and all(b.n_passed == 2 for b in layouts.values())
    assert layouts["cache-aware"].tokens.hit_ratio > layouts["naive"].tokens.hit_ratio


@pytest.mark.slow
def test_cold_runs_never_hit_earlier_runs_and_warm_runs_do(tmp_path, model_dir, engine):
    db = tmp_path / "coldwarm.db"
    routes = RouterRoutes(f"local/{model_dir}", env={}, server=engine)

    def first_call(mode: str):
        run = run_eval(_settings(model_dir, task_ids=["roman-parse"], cache_mode=mode), db_path=db, routes=routes)
        assert run.results[0].outcome == "pass"
        with Ledger(db) as ledger:
            return ledger.calls(run_id=run.run_id)[0]

    first_call("cold")
    cold = first_call("cold")
    # Only the chat-template bytes ahead of the nonce ("<|im_start|>system\n[eval run ") can match.
    assert cold.usage.cache_read < 16 and cold.usage.cache_write_total > 1000
    first_call("warm")
    warm = first_call("warm")
    assert warm.usage.cache_read > 1000


@pytest.mark.slow
def test_eval_cli_resume_and_merge(tmp_path, model_dir):
    app = typer.Typer()
    cli_eval.register(app)
    cli_merge.register(app)
    runner = CliRunner()
    db = tmp_path / "cli.db"
    args = ["eval", "--task", "roman-parse", "--policy", "replay", "--model", f"local/{model_dir}", "--db", str(db), "--run-id", "cli-run"]
    result = runner.invoke(app, args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    assert "run cli-run: finished; 1 task(s) run" in result.output and "eval report" in result.output
    again = runner.invoke(app, ["eval", "--resume", "cli-run", "--db", str(db), "--no-report"])
    assert again.exit_code == 0 and "0 task(s) run, 1 already finished" in again.output
    merged = tmp_path / "merged.db"
    out = runner.invoke(app, ["ledger-merge", str(merged), str(db)])
    assert out.exit_code == 0, out.output
    with Ledger(merged) as ledger:
        assert [t.outcome for t in ledger.tasks(run_id="cli-run")] == ["pass"]


@pytest.mark.slow
def test_demo_compares_layouts_offline(tmp_path, monkeypatch, model_dir):
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = io.StringIO()
    result = run_demo(db=tmp_path / "demo.db", cache=model_dir.parent, out=out, tasks=("roman-parse", "ttl-cache"))
    text = out.getvalue()
    assert text.startswith(BANNER.splitlines()[0]) and "not a measure of model quality" in text
    assert result.ok and set(result.runs) == {"cache-aware", "naive"}
    assert "Σ-hit ratio" in text and "cache-aware vs naive on the same 2 tasks" in text
    # The report itself is priced as the illustration model: costs shown, never "unpriced".
    report = text[text.index("eval report:"):]  # the progress lines above say the engine's calls are unpriced
    assert f"costs priced as {ILLUSTRATION_MODEL}" in report and "unpriced" not in report
    assert f"calls with a miss, by reason (costs priced as {ILLUSTRATION_MODEL})" in text
    assert "cheaper per passed task than naive" in text and "replay" in text
    aware, naive = result.figures["cache-aware"], result.figures["naive"]
    assert f"${aware.illustrative_cost_usd:,.4f}" in text and f"${naive.illustrative_cost_usd:,.4f}" in text
    with Ledger(tmp_path / "demo.db") as ledger:  # the engine's rows stay unpriced
        assert all(c.cost_usd is None for c in ledger.calls())
    assert aware.cache_read > naive.cache_read and aware.illustrative_cost_usd < naive.illustrative_cost_usd
    assert result.saving is not None and 0 < result.saving < 1
    assert f"costs {result.saving:.0%} less" in text
