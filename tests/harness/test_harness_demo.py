"""The one-session offline demo: no key, the real pipeline on a tiny random model (smoke test)."""

from __future__ import annotations

import io

import pytest

from hitrate.harness.demo import BANNER, MODEL_DIR_NAME, load_script, run_demo
from hitrate.harness.events import EventList
from hitrate.store.ledger import Ledger


def test_demo_script_is_valid_data():
    script = load_script()
    assert script.turns[-1].tool_calls == [] and all(t.tool_calls for t in script.turns[:-1])
    assert {"check.py", "textstats.py", "AGENTS.md"} <= set(script.files)


@pytest.mark.slow
def test_demo_runs_offline_and_records_every_call(tmp_path, monkeypatch):
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = io.StringIO()
    db = tmp_path / "demo.db"
    events = EventList()

    def sink(event):
        events(event)

    result = run_demo(db=db, cache=tmp_path / "cache", out=out)
    text = out.getvalue()
    assert text.startswith(BANNER)
    assert result.status == "end_turn"
    steps = len(load_script().turns)
    assert result.steps == steps
    assert (tmp_path / "cache" / MODEL_DIR_NAME / "config.json").is_file()
    with Ledger(db) as ledger:
        rows = ledger.calls()
    assert len(rows) == steps and all(r.error is None and r.backend == "local" for r in rows)
    assert rows[0].miss_reason == "cold"
    assert all(r.usage.cache_read > 0 and r.miss_reason is None for r in rows[1:])
    for n in range(1, steps + 1):
        assert f"[call {n}] read " in text
    assert "hit ratio (Σread / Σ(read+write+fresh))" in text and "step 1: cold" in text
    assert "all checks passed" in text  # the replayed fix really ran in the temporary workspace
    # A second run reuses the built model.
    built = (tmp_path / "cache" / MODEL_DIR_NAME / "config.json").stat().st_mtime_ns
    run_demo(db=db, cache=tmp_path / "cache", out=io.StringIO(), sink=sink)
    assert (tmp_path / "cache" / MODEL_DIR_NAME / "config.json").stat().st_mtime_ns == built
    assert len(events.events) > 0
