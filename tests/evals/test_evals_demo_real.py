"""`hitrate demo`'s first part: a model does tasks itself (no replay) in both layouts, then the
replayed A/B, one report. The pipeline is checked with the tiny random-weight model standing in
for the coding model (its replies are noise: it fails, and the runs must still finish and say how
they ended). With $HITRATE_DEMO_REAL_MODEL set to the packaged GGUF, the same runs with the real
model (minutes on a CPU: opt-in)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from hitrate.evals.demo import LAYOUTS, run_demo
from hitrate.harness.demo import ensure_demo_model
from hitrate.store.ledger import Ledger


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return ensure_demo_model(tmp_path_factory.mktemp("demo-model"))


def _offline(monkeypatch) -> None:
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.slow
def test_the_model_part_runs_both_layouts_and_reports_how_they_ended(tmp_path, monkeypatch, model_dir):
    _offline(monkeypatch)
    out = io.StringIO()
    db = tmp_path / "demo.db"
    result = run_demo(db=db, cache=model_dir.parent, out=out, tasks=("roman-parse",), real_model=f"local/{model_dir}",
                      real_tasks=("roman-parse",), real_max_steps=3, real_max_wall_s=120)
    text = out.getvalue()
    assert "Part 1: a real coding model does the job" in text
    assert set(result.real_runs) == set(LAYOUTS) and all(r.status == "finished" for r in result.real_runs.values())
    assert result.ok  # the replayed task passed; the model's runs finished
    for layout in LAYOUTS:
        figures = result.real_figures[layout]
        assert figures.tasks == 1 and sum(figures.ended.values()) == 1
    assert f"the agent itself, local/{model_dir}, no replay:" in text and "ended: 1×" in text
    assert "cache-aware vs naive on the same 1 tasks" in text  # the replayed part follows
    with Ledger(db) as ledger:
        real = ledger.calls(run_id=result.real_runs["cache-aware"].run_id)
        assert real and all(not c.section_hashes or c.error is None for c in real)
        # The model's own requests carried no tools (text protocol): an empty tools section.
        assert real[0].sections[0].kind == "tools" and real[0].sections[0].tokens == 0


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("HITRATE_DEMO_REAL_MODEL"), reason="set HITRATE_DEMO_REAL_MODEL to the packaged GGUF")
def test_the_packaged_model_does_the_demo_tasks(tmp_path, monkeypatch, model_dir):
    _offline(monkeypatch)
    out = io.StringIO()
    gguf = Path(os.environ["HITRATE_DEMO_REAL_MODEL"])
    result = run_demo(db=tmp_path / "demo.db", cache=model_dir.parent, out=out, tasks=("roman-parse",), real_model=f"local/{gguf}")
    print(out.getvalue())
    assert result.ok
