"""A long session clears old large tool results before it compacts: the stubs name what was there,
the next call's miss says `cleared`, the session runs to its end inside the window with fewer
summary calls, and a resumed session is rebuilt with the same stubs."""

from __future__ import annotations

import json

from test_harness_compaction import RULES, _session, summarizing
from scripted_model import scripted_route

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.session import Session
from hitrate.projection.clearing import STUB_PREFIX
from hitrate.projection.transcript import UserMessage


def _reads(n: int) -> list[dict]:
    """Tool rounds whose results (~1.1K tokens each) are small next to the window, so many pile up."""
    return [{"tool_calls": [("shell", json.dumps({"command": f"seq {i} 800"}))]} for i in range(n)]


def _stubs(session: Session) -> list[str]:
    return [b.content for m in session.transcript.messages if isinstance(m, UserMessage)
            for b in m.tool_results if b.content.startswith(STUB_PREFIX)]


def test_clearing_comes_before_compaction_and_the_session_finishes(workspace, ledger) -> None:
    route = summarizing(scripted_route(_reads(12) + [{"text": "all done"}], rules=RULES))
    session = _session(route, workspace, ledger, window=12_000, clear_tool_results=True)
    result = Agent(session, limits=AgentLimits(max_steps=30, show_budget=False)).run("Run the commands one by one.")
    assert result.status == "end_turn", result.detail
    rows = ledger.calls(session_id=session.id)
    assert all(r.usage.prompt_tokens <= 12_000 for r in rows)
    assert "cleared" in [r.miss_reason for r in rows]
    stubs = _stubs(session)
    assert stubs and all("shell" in s and "seq" in s for s in stubs)
    assert session.last_clearing is not None and session.last_clearing.clear

    resumed = Session.resume(ledger, session.id, scripted_route([], rules=RULES), sink=EventList(),
                             context=lambda: {"date": "d"}, sleep=lambda s: None)
    assert resumed.transcript == session.transcript


def test_clearing_saves_summary_calls(workspace, ledger) -> None:
    counts = {}
    for clear in (False, True):
        route = summarizing(scripted_route(_reads(24) + [{"text": "all done"}], rules=RULES))
        session = _session(route, workspace, ledger, window=12_000, clear_tool_results=clear)
        result = Agent(session, limits=AgentLimits(max_steps=60, show_budget=False)).run("Run the commands one by one.")
        assert result.status == "end_turn", result.detail
        counts[clear] = [r.kind for r in ledger.calls(session_id=session.id)].count("compaction")
    assert counts[True] < counts[False], counts
