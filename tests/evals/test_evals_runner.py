"""The eval runner against a provider-like fake backend: outcomes, grading, tries, limits, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evals_task_factory import FIXED, write_task
from runner_fakes import FakeRoutes, PrefixCacheBackend, first_user_text, workspace_of

from hitrate.evals.replay import ReplayError
from hitrate.evals.runner import EvalError, run_eval, select_tasks
from hitrate.evals.settings import EvalSettings
from hitrate.evals.task import bundled_suite_path, load_suite
from hitrate.harness.wire.types import CallError
from hitrate.store.ledger import Ledger

BUNDLED_PAIR = ["lru-recency", "roman-parse"]


def _settings(suite: Path, **overrides) -> EvalSettings:
    base = {"suite": str(suite), "model": "openai-compat/fake@http://127.0.0.1:9/v1", "policy": "replay"}
    return EvalSettings(**{**base, **overrides})


def test_reference_replay_passes_and_records_everything(tmp_path):
    backend = PrefixCacheBackend()
    db = tmp_path / "runs.db"
    settings = _settings(bundled_suite_path(), task_ids=BUNDLED_PAIR)
    result = run_eval(settings, db_path=db, workers=2, routes=FakeRoutes(backend))
    assert result.status == "finished" and result.skipped == []
    assert [r.name for r in result.results] == BUNDLED_PAIR  # suite order, whatever finished first
    assert all(r.outcome == "pass" and r.pass_try == 1 and r.calls > 3 for r in result.results)
    with Ledger(db) as ledger:
        run = ledger.get_run(result.run_id)
        assert run.status == "finished" and run.config["settings"]["nonce"] == result.settings.nonce
        assert run.config["layout"] == "cache-aware" and run.config["cache_mode"] == "cold"
        rows = {t.name: t for t in ledger.tasks(run_id=result.run_id)}
        assert set(rows) == set(BUNDLED_PAIR)
        for name, row in rows.items():
            assert row.outcome == "pass" and row.finished_at is not None
            tries = row.detail["tries"]
            assert len(tries) == 1 and tries[0]["resolved"] is True
            assert tries[0]["f2p_passed"] == tries[0]["f2p_total"] > 0
            assert tries[0]["p2p_passed"] == tries[0]["p2p_total"]
            names = [c["name"] for turn in tries[0]["turns"] for c in turn["tool_calls"]]
            assert names[0] == "list_dir" and "write_file" in names and names[-1] == "shell"
            assert row.detail["wall_s"] > 0 and row.detail["layout"] == "cache-aware"
            calls = ledger.calls(task_id=row.id)
            assert len(calls) == len(tries[0]["turns"])
            assert {c.run_id for c in calls} == {result.run_id}
            assert {c.session_id for c in calls} == {tries[0]["session_id"]}
            assert {(c.layout, c.cache_mode) for c in calls} == {("cache-aware", "cold")}
    # Every prompt starts with the run's nonce, in the tool rendered first and in the system prompt.
    nonce = result.settings.nonce
    assert all(nonce in p.tools[0].description and p.system.startswith(f"[eval run {nonce}]") for p in backend.prompts)


def test_outcomes_fail_agent_error_timeout(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "stays-buggy")
    for task_id, old, new in (("loops", "max_steps = 5", "max_steps = 2"), ("slow", "max_wall_s = 60", "max_wall_s = 0.3")):
        toml = Path(write_task(suite, task_id)) / "task.toml"
        toml.write_text(toml.read_text().replace(old, new))
    loop_call = {"tool_calls": [("list_dir", "{}")]}
    # One worker runs the tasks in suite order: loops, slow, stays-buggy.
    backend = PrefixCacheBackend(
        replies=[loop_call, loop_call, {"text": "I changed nothing."}, {"text": "Done."}],
        delay=lambda prompt: 0.6 if "-slow-" in workspace_of(prompt) else 0.0,
    )
    result = run_eval(_settings(suite, policy="model"), db_path=tmp_path / "o.db", routes=FakeRoutes(backend))
    outcomes = {r.name: r.outcome for r in result.results}
    # loops: stopped by its step limit; slow: its only call outlasted the wall-time limit; stays-buggy: tests fail.
    assert outcomes == {"loops": "agent_error", "slow": "timeout", "stays-buggy": "fail"}
    assert result.status == "finished"  # all three are final outcomes
    assert "limit of 2 model calls" in next(r.detail for r in result.results if r.name == "loops")
    # A plain fail says what the hidden tests found, not only why the agent stopped.
    buggy = next(r.detail for r in result.results if r.name == "stays-buggy")
    assert buggy.startswith("fail-to-pass 0/") and "agent: the model ended its turn" in buggy


def test_second_try_gets_the_failing_output_and_passes(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    backend = PrefixCacheBackend(
        replies=[
            {"text": "Looks fine to me."},
            {"text": "Fixing.", "tool_calls": [("write_file", json.dumps({"path": "mathx.py", "content": FIXED}))]},
            {"text": "Fixed."},
        ]
    )
    db = tmp_path / "tries.db"
    result = run_eval(_settings(suite, policy="model", tries=2), db_path=db, routes=FakeRoutes(backend))
    (task,) = result.results
    assert task.outcome == "pass" and task.pass_try == 2 and task.tries == 2
    feedback = backend.prompts[1].messages[-1]
    text = "".join(getattr(b, "text", "") for b in feedback.content)
    assert "hidden tests were run" in text and "test_add" in text and "assert -1 == 5" in text
    with Ledger(db) as ledger:
        (row,) = ledger.tasks(run_id=result.run_id)
        first, second = row.detail["tries"]
        assert first["resolved"] is False and first["f2p_passed"] == 0 and first["p2p_passed"] == 1
        assert second["resolved"] is True and second["session_id"] == first["session_id"]
        assert [c["name"] for t in second["turns"] for c in t["tool_calls"]] == ["write_file"]


def test_infra_errors_are_retried_on_resume_in_the_same_row(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    write_task(suite, "fix-add-too")
    broken = {"on": True}

    def fail(prompt):
        if broken["on"] and "-fix-add-too-" in workspace_of(prompt):
            return CallError("key rejected", kind="auth", status=401)
        return None

    backend = PrefixCacheBackend(fail=fail)
    db = tmp_path / "resume.db"
    first = run_eval(_settings(suite), db_path=db, routes=FakeRoutes(backend))
    assert {r.name: r.outcome for r in first.results} == {"fix-add": "pass", "fix-add-too": "infra_error"}
    assert first.status == "incomplete"
    failed_row = next(r for r in first.results if r.outcome == "infra_error")
    assert "auth" in failed_row.detail

    broken["on"] = False
    calls_before = len(backend.prompts)
    again = run_eval(None, db_path=db, resume=first.run_id, routes=FakeRoutes(backend))
    assert again.run_id == first.run_id and again.status == "finished"
    assert again.skipped == ["fix-add"] and [r.name for r in again.results] == ["fix-add-too"]
    assert again.results[0].outcome == "pass" and again.results[0].ledger_task_id == failed_row.ledger_task_id
    assert all("-fix-add-too-" in workspace_of(p) for p in backend.prompts[calls_before:])
    with Ledger(db) as ledger:
        rows = ledger.tasks(run_id=first.run_id)
        assert len(rows) == 2 and {r.outcome for r in rows} == {"pass"}
        row = ledger.get_task(failed_row.ledger_task_id)
        assert row.detail["attempt"] == 2 and row.detail["previous_attempts"][0]["outcome"] == "infra_error"
        calls = ledger.calls(task_id=row.id)
        assert any(c.error for c in calls) and any(c.error is None for c in calls)  # the failed attempt stays recorded
        assert ledger.get_run(first.run_id).status == "finished"

    # Nothing left: a further resume runs nothing.
    done = run_eval(None, db_path=db, resume=first.run_id, routes=FakeRoutes(backend))
    assert done.results == [] and sorted(done.skipped) == ["fix-add", "fix-add-too"]


def test_replaying_a_recorded_run_sends_the_same_tool_calls(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    write_call = ("write_file", json.dumps({"path": "mathx.py", "content": FIXED}, separators=(",", ":")))
    model_backend = PrefixCacheBackend(replies=[
        {"text": "Reading.", "tool_calls": [("read_file", '{"path": "mathx.py"}')]},
        {"text": "Fixing.", "tool_calls": [write_call]},
        {"text": "Done."},
    ])  # fmt: skip
    db = tmp_path / "rec.db"
    recorded = run_eval(_settings(suite, policy="model"), db_path=db, routes=FakeRoutes(model_backend))
    assert recorded.results[0].outcome == "pass"

    replay_backend = PrefixCacheBackend()
    replayed = run_eval(_settings(suite, replay_from=recorded.run_id), db_path=db, routes=FakeRoutes(replay_backend))
    assert replayed.results[0].outcome == "pass" and len(replay_backend.prompts) == 3
    last = replay_backend.prompts[-1]
    sent = [(c.name, c.arguments) for m in last.messages if m.role == "assistant" for c in m.tool_calls]
    assert sent == [("read_file", '{"path": "mathx.py"}'), write_call]

    with pytest.raises(Exception, match="no run"):
        run_eval(_settings(suite, replay_from="nope"), db_path=db, routes=FakeRoutes(replay_backend))

    # A task the recorded run never ran is refused up front, naming the ones that can be replayed.
    write_task(suite, "not-recorded")
    sent_before = len(replay_backend.prompts)
    with pytest.raises(ReplayError, match=r"no finished turns for 1 of the 2 selected task\(s\) \(not-recorded\).*--task fix-add"):
        run_eval(_settings(suite, replay_from=recorded.run_id), db_path=db, routes=FakeRoutes(replay_backend))
    assert len(replay_backend.prompts) == sent_before


def test_cold_nonce_prevents_hits_and_warm_reuses(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    backend = PrefixCacheBackend()
    routes = FakeRoutes(backend)
    db = tmp_path / "cache.db"

    def run(mode: str, nonce: str | None = None):
        before = len(backend.usages)
        result = run_eval(_settings(suite, cache_mode=mode, nonce=nonce), db_path=db, routes=routes)
        assert result.results[0].outcome == "pass"
        return result, backend.usages[before:], backend.prompts[before:]

    run("warm")
    _, reads, prompts = run("warm")
    head = prompts[0].sections[2].prefix_tokens
    assert reads[0].cache_read >= head > 0  # the second warm run reads the head the first one cached
    cold, reads, _ = run("cold")
    assert reads[0].cache_read == 0, "a cold run must not hit anything cached before it"
    assert all(u.cache_read > 0 for u in reads[1:])  # within the run, requests share their prefix
    _, reads, _ = run("cold")
    assert reads[0].cache_read == 0
    _, reads, prompts = run("warm", nonce=cold.settings.nonce)  # warm, reusing the cold run's cache
    assert reads[0].cache_read >= prompts[0].sections[2].prefix_tokens


def test_select_tasks_and_bad_settings(tmp_path):
    suite = load_suite(bundled_suite_path())
    every = [t.id for t in suite.tasks]
    picked = select_tasks(suite, _settings(bundled_suite_path(), shard="2/3"))
    assert [t.id for t in picked] == [t for i, t in enumerate(sorted(every)) if i % 3 == 1]
    with pytest.raises(EvalError, match="no-such-task"):
        select_tasks(suite, _settings(bundled_suite_path(), task_ids=["no-such-task"]))
    with pytest.raises(EvalError, match="resume"):
        run_eval(None, db_path=tmp_path / "x.db", resume="missing")
    with pytest.raises(ValueError):
        EvalSettings(suite="s", model="m", tries=3)
    backend = PrefixCacheBackend()
    run = run_eval(_settings(bundled_suite_path(), task_ids=["roman-parse"]), db_path=tmp_path / "x.db", routes=FakeRoutes(backend),
                   run_id="fixed-id")  # fmt: skip
    assert run.run_id == "fixed-id"
    with pytest.raises(EvalError, match="already exists"):
        run_eval(_settings(bundled_suite_path(), task_ids=["roman-parse"]), db_path=tmp_path / "x.db", routes=FakeRoutes(backend),
                 run_id="fixed-id")  # fmt: skip
    assert first_user_text(backend.prompts[0]).startswith(load_suite(bundled_suite_path()).task("roman-parse").instruction[:20])


def test_progress_bar_follows_calls_outcomes_and_cost(tmp_path):
    import io

    from rich.console import Console

    from hitrate.evals.progress import RichProgress

    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    write_task(suite, "fix-add-too")
    out = io.StringIO()
    with RichProgress("eval test", console=Console(file=out, width=160)) as progress:
        result = run_eval(_settings(suite), db_path=tmp_path / "p.db", routes=FakeRoutes(PrefixCacheBackend()), observer=progress,
                          workers=2)  # fmt: skip
    totals = progress.totals
    assert totals.calls == sum(r.calls for r in result.results) > 0
    assert totals.outcomes == {"pass": 2}
    assert totals.cost_text() == "unpriced"  # the fake model has no price: never shown as $0
    assert totals.hit_text().startswith("hit ") and totals.read > 0
    assert "eval test" in out.getvalue() and "2/2" in out.getvalue()


def test_no_second_try_after_an_empty_reply(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    backend = PrefixCacheBackend(replies=[{}])  # the model answers nothing at all
    result = run_eval(_settings(suite, policy="model", tries=2), db_path=tmp_path / "e.db", routes=FakeRoutes(backend))
    (task,) = result.results
    assert task.outcome == "fail" and task.tries == 1 and len(backend.prompts) == 1


def test_a_backend_that_cannot_be_resolved_fails_the_run_once(tmp_path):
    from hitrate.harness.models import ModelSpecError

    class NoKey(FakeRoutes):
        def open(self):
            raise ModelSpecError("anthropic/x needs an API key: set ANTHROPIC_API_KEY in the environment")

    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    db = tmp_path / "nokey.db"
    with pytest.raises(ModelSpecError, match="ANTHROPIC_API_KEY"):
        run_eval(_settings(suite), db_path=db, routes=NoKey(PrefixCacheBackend()))
    with Ledger(db) as ledger:
        (run,) = ledger.runs()
        assert run.status == "failed" and ledger.tasks(run_id=run.id) == []
