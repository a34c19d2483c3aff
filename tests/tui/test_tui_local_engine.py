"""The app on the bundled local engine: a tiny random-weight model built offline, served on
127.0.0.1 by `local/<path>`, driven by the real harness. Its replies are noise; what is checked is
that turns run and the cache figures are the engine's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import fixed_context, submit, wait_until

from hitrate.engine.tiny import build_tiny_model
from hitrate.harness.agent import AgentLimits
from hitrate.harness.router import Router
from hitrate.harness.session import SessionConfig
from hitrate.tui.app import HitrateApp
from hitrate.tui.cache_panel import CallBar
from hitrate.tui.harness_link import HarnessLink
from hitrate.tui.status import StatusLine


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tui-tiny"), "llama", vocab_size=512, hidden=32,
                            layers=2, heads=2, kv_heads=1, max_positions=32768, seed=0)


@pytest.mark.slow
async def test_two_turns_on_the_local_engine(tiny_model, workspace, ledger, clock):
    link = HarnessLink(f"local/{tiny_model}", workspace, ledger.path, router=Router(env={}), context=fixed_context,
                       clock=clock, limits=AgentLimits(max_steps=2, show_budget=False),
                       session_config=SessionConfig(max_output_tokens=8, label="tui"))
    try:
        app = HitrateApp(link, approvals=False, clock=clock, tick_s=None, workspace=workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            await submit(pilot, "hello")
            await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the first turn", tries=1500)
            first = len(app.figures.calls)
            await submit(pilot, "and again")
            await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) > first, "the second turn", tries=1500)

            rows = ledger.calls(session_id=link.session_id)
            assert rows and all(r.backend == "local" and r.error is None for r in rows)
            assert [f.usage for f in app.figures.calls] == [r.usage for r in rows]
            # The second prompt starts with the first: the engine's radix cache served it.
            assert app.figures.calls[first].usage.cache_read > 0
            assert app.figures.totals().hit_ratio is not None and len(app.query(CallBar)) == len(rows)
            line = app.query_one(StatusLine).full_text
            assert line.startswith(f"local/{tiny_model}")
            assert "cache unknown · LRU prefix cache" in line
    finally:
        link.close()
