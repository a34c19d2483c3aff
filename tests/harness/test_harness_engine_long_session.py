"""A long session on the bundled engine runs past a small context window to its end: the harness
compacts (and clears) before each prompt would pass the window, so the engine, which refuses any
prompt longer than its model's window, never answers with a length error."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.policy import RecordedToolCall, RecordedTurn, ReplayPolicy
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.session_inputs import session_inputs
from hitrate.tools.files import ReadFileTool
from hitrate.tools.registry import ToolRegistry

pytest.importorskip("torch")

ROUNDS = 48


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from hitrate.engine.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("long-session"), "llama", vocab_size=512, hidden=32,
                            layers=2, heads=2, kv_heads=1, max_positions=4096, seed=0)


def _turns() -> list[RecordedTurn]:
    reads = [RecordedTurn(text=f"Step {i}: reading module {i % 4}.",
                          tool_calls=[RecordedToolCall(name="read_file", arguments={"path": f"mod{i % 4}.py"})])
             for i in range(ROUNDS)]
    return reads + [RecordedTurn(text="All modules read.")]


WINDOW = 3000
ENGINE_WINDOW = 4096


@pytest.mark.slow
def test_a_session_runs_past_a_small_window_to_its_end(tiny_model, workspace, ledger) -> None:
    for n in range(4):
        (workspace / f"mod{n}.py").write_text("".join(f"def f{n}_{k}(x):\n    return x * {k} + {n}\n" for k in range(6)))
    # A small head (one tool, a one-line system prompt): the tiny model's tokenizer is nearly byte-level.
    # 24 output tokens: a random model's reply can open with a `<tool_call>` marker, and a summary
    # that is all tool call has no text; with a few more tokens every summary here has some.
    inputs = session_inputs(workspace, tools=ToolRegistry([ReadFileTool()]), system="You are a coding agent. Read files when asked.")
    route = Router(env={}).resolve(f"local/{tiny_model}")
    try:
        session = Session(route, workspace, ledger=ledger, inputs=inputs, sink=EventList(), context=lambda: {"date": "d"},
                          config=SessionConfig(max_output_tokens=24, context_window=WINDOW), sleep=lambda s: None)
        result = Agent(session, policy=ReplayPolicy(_turns()), limits=AgentLimits(max_steps=80, show_budget=False)).run(
            "Read every module, one at a time.")
    finally:
        route.close()
    assert result.status == "end_turn", result.detail
    rows = ledger.calls(session_id=session.id)
    assert all(r.error is None for r in rows), [r.error for r in rows if r.error]
    agent_rows = [r for r in rows if r.kind is None]
    assert len(agent_rows) == ROUNDS + 1
    # The history grew to more than three windows (what each agent call added, summed), yet no
    # prompt passed the engine's window, and no agent call the session's.
    sizes = [r.usage.prompt_tokens for r in agent_rows]
    grown = sizes[0] + sum(b - a for a, b in zip(sizes, sizes[1:]) if b > a)
    assert grown > 3 * WINDOW, grown
    assert max(sizes) <= WINDOW and max(r.usage.prompt_tokens for r in rows) <= ENGINE_WINDOW
    assert "compacted" in {r.miss_reason for r in rows}
    summaries = [r for r in rows if r.kind == "compaction"]
    assert summaries and all(r.usage.cache_read / r.usage.prompt_tokens > 0.7 for r in summaries)
