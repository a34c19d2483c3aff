"""`hitrate eval --max-steps / --max-wall / --tool-protocol`: run-wide settings over each task's
own, recorded with the run; the text protocol and the harness's turns in the task's detail."""

from __future__ import annotations

import json
from pathlib import Path

from evals_task_factory import FIXED, write_task
from runner_fakes import FakeRoutes, PrefixCacheBackend

from hitrate.evals.attempt import effective_limits
from hitrate.evals.runner import run_eval
from hitrate.evals.settings import EvalSettings
from hitrate.evals.task import TaskLimits
from hitrate.harness.text_protocol import FINISH_COMMAND
from hitrate.store.ledger import Ledger

SPEC = "openai-compat/fake@http://127.0.0.1:9/v1"


def _settings(suite: Path, **overrides) -> EvalSettings:
    return EvalSettings(**{"suite": str(suite), "model": SPEC, "policy": "model", **overrides})


def test_overrides_replace_only_what_they_name():
    limits = TaskLimits(max_steps=20, max_cost_usd=1.0, max_wall_s=300)
    assert effective_limits(limits, _settings(Path("/s"))) == limits
    changed = effective_limits(limits, _settings(Path("/s"), max_steps=3, max_wall_s=7.5))
    assert (changed.max_steps, changed.max_cost_usd, changed.max_wall_s) == (3, 1.0, 7.5)


def test_max_steps_override_stops_the_agent_sooner(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "loops")  # its task.toml allows 5 calls
    backend = PrefixCacheBackend(replies=[{"tool_calls": [("list_dir", "{}")]}] * 5)
    result = run_eval(_settings(suite, max_steps=2), db_path=tmp_path / "o.db", routes=FakeRoutes(backend))
    [task] = result.results
    assert task.outcome == "agent_error" and "limit of 2 model calls" in task.detail
    assert len(backend.prompts) == 2


def test_text_protocol_eval_passes_and_records_harness_turns(tmp_path):
    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    fix = "cat <<'EOF' > mathx.py\n" + FIXED + "EOF"
    backend = PrefixCacheBackend(replies=[
        {"text": "I will look.\n```bash\ncat mathx.py\n```"},
        {"text": "Forgot the block."},
        {"text": f"Fix it.\n```bash\n{fix}\n```"},
        {"text": f"Done.\n```bash\n{FINISH_COMMAND}\n```"},
    ])
    db = tmp_path / "o.db"
    result = run_eval(_settings(suite, tool_protocol="text"), db_path=db, routes=FakeRoutes(backend))
    [task] = result.results
    assert task.outcome == "pass"
    assert all(not p.tools for p in backend.prompts)
    with Ledger(db) as ledger:
        [row] = ledger.tasks(run_id=result.run_id)
        [attempt] = row.detail["tries"]
    assert attempt["agent_detail"] == "the model submitted its work"
    assert attempt["harness_turns"] == {"format_error": 1}
    stored = json.loads(json.dumps(row.detail))
    assert stored["agent_status"] == "end_turn" and stored["tool_protocol"] == "text"
    from hitrate.evals.report import load_report

    [block] = load_report(db, [result.run_id]).blocks
    assert block.key.protocol == "text" and block.key.label.endswith("· text protocol")


def test_the_report_says_how_runs_ended_and_what_the_harness_added(tmp_path):
    from rich.console import Console

    from hitrate.evals.report import end_reason, load_report
    from hitrate.evals.report_render import tables

    suite = tmp_path / "suite"
    write_task(suite, "fix-add")
    write_task(suite, "gives-up")
    backend = PrefixCacheBackend(replies=[
        {"text": '```json\n{"name": "read_file", "arguments": {"path": "mathx.py"}}\n```'},
        {"text": '{"name": "read_file", "arguments": {"path": "mathx.py"}}'},
        {"text": "Nothing to fix."},
    ])
    db = tmp_path / "o.db"
    result = run_eval(_settings(suite), db_path=db, routes=FakeRoutes(backend))
    [block] = load_report(db, [result.run_id]).blocks
    assert block.end_reasons == {"the repair turn did not produce a call": 1, "the model ended its turn": 1}
    assert block.harness_turns == {"repair": 1}
    console = Console(width=100, record=True, color_system=None)
    console.print(tables(load_report(db, [result.run_id])))
    text = console.export_text()
    assert "the agent's run ended" in text and "the repair turn did not produce a call" in text
    assert "harness turns added: 1 repair" in text
    assert end_reason({"agent_status": "max_steps", "agent_detail": "reached the limit"}) == "max_steps"
    assert end_reason({}) is None
