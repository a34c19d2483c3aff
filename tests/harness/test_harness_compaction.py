"""A session that outgrows its model's window keeps going: it compacts before the prompt passes
the threshold (the summary call reading the history from the cache), or after the provider refuses
a prompt as too long (once), and a resumed session is rebuilt as compacted."""

from __future__ import annotations

import json

from scripted_model import scripted_route

from hitrate.projection.compaction import compaction_instruction

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.session_compaction import prompt_too_long
from hitrate.harness.wire.types import CallError
from hitrate.projection.caching import CacheRules
from hitrate.projection.compaction import SUMMARY_HEADER

RULES = CacheRules(family="openai_compat")
SUMMARY = "Task: read calc.py repeatedly. Done so far: several reads. Left: finish."


def _reads(n: int) -> list[dict]:
    return [{"tool_calls": [("shell", json.dumps({"command": f"seq {i} 2500"}))]} for i in range(n)]


def summarizing(route):
    """The scripted model answers a summary request with SUMMARY, whatever its script says next."""
    backend = route.backend
    plain = backend.call

    def call(prompt, *, max_tokens, on_text=None):
        last = prompt.messages[-1]
        if any(getattr(b, "text", "") == compaction_instruction() for b in last.content):
            backend.script.insert(0, {"text": SUMMARY})
        return plain(prompt, max_tokens=max_tokens, on_text=on_text)

    backend.call = call
    return route


def _session(route, workspace, ledger, window: int, **config) -> Session:
    config = {"clear_tool_results": False, **config}  # clearing has its own tests (test_harness_clearing)
    return Session(route, workspace, ledger=ledger, sink=EventList(), context=lambda: {"date": "d"},
                   config=SessionConfig(context_window=window, compact_at=0.8, **config), sleep=lambda s: None)


def test_a_session_past_its_window_compacts_and_finishes(workspace, ledger) -> None:
    route = summarizing(scripted_route(_reads(12) + [{"text": "all done"}], rules=RULES))
    session = _session(route, workspace, ledger, window=12_000)
    result = Agent(session, limits=AgentLimits(max_steps=30, show_budget=False)).run("Run the commands one by one.")
    assert result.status == "end_turn", result.detail
    rows = ledger.calls(session_id=session.id)
    kinds = [r.kind for r in rows]
    assert "compaction" in kinds
    assert kinds.count("compaction") >= 2
    sizes = [(r.kind, r.usage.prompt_tokens) for r in rows]
    assert all(r.usage.prompt_tokens <= 12_000 for r in rows), sizes  # never past the window
    for i, row in enumerate(rows):
        if row.kind == "compaction":
            # The summary request re-sends the cached prefix: nearly all of it is read.
            assert row.usage.cache_read / row.usage.prompt_tokens > 0.8
            after = rows[i + 1]
            assert after.miss_reason == "compacted"
    first = session.transcript.messages[0]
    assert first.content[0].text.startswith(SUMMARY_HEADER)

    resumed = Session.resume(ledger, session.id, scripted_route([], rules=RULES), sink=EventList(),
                             context=lambda: {"date": "d"}, sleep=lambda s: None)
    assert resumed.transcript == session.transcript


def test_a_prompt_refused_as_too_long_is_compacted_and_sent_once_more(workspace, ledger) -> None:
    too_long = CallError("anthropic/x: invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum", kind="client_error", status=400)
    assert prompt_too_long(too_long)
    route = summarizing(scripted_route(_reads(2) + [too_long, {"text": "done"}], rules=RULES))
    session = _session(route, workspace, ledger, window=10**9)  # the threshold never triggers
    result = Agent(session, limits=AgentLimits(show_budget=False)).run("Run two commands.")
    assert result.status == "end_turn", result.detail
    rows = ledger.calls(session_id=session.id)
    assert [r.kind for r in rows][-3:] == [None, "compaction", None]
    assert rows[-3].error is not None and "too long" in rows[-3].error


def test_a_second_refusal_is_not_retried_again(workspace, ledger) -> None:
    too_long = CallError("x: prompt is too long: 9 tokens > 8 maximum", kind="client_error", status=400)
    route = summarizing(scripted_route(_reads(1) + [too_long, too_long], rules=RULES))
    session = _session(route, workspace, ledger, window=10**9)
    result = Agent(session, limits=AgentLimits(show_budget=False)).run("Run a command.")
    assert result.status == "error" and "too long" in result.detail


def test_compaction_off_lets_the_provider_refuse(workspace, ledger) -> None:
    too_long = CallError("x: prompt is too long: 9 tokens > 8 maximum", kind="client_error", status=400)
    route = summarizing(scripted_route(_reads(12) + [too_long], rules=RULES))
    session = _session(route, workspace, ledger, window=12_000, compaction="off")
    result = Agent(session, limits=AgentLimits(max_steps=30, show_budget=False)).run("Run the commands one by one.")
    assert result.status == "error" and "too long" in result.detail
    assert "compaction" not in [r.kind for r in ledger.calls(session_id=session.id)]


def test_the_summary_call_is_a_pending_row_while_it_runs_and_a_failed_one_stays(workspace, ledger) -> None:
    # A summary request is a model call like any other: its row is in the ledger before the request
    # goes out (so a kill -9 during it leaves the row), and a failed one keeps its row and error.
    route = scripted_route(_reads(2) + [{"text": "done"}], rules=RULES)
    session = _session(route, workspace, ledger, window=10**9)
    Agent(session, limits=AgentLimits(show_budget=False)).run("Run two commands.")
    backend = route.backend
    seen: list[list[tuple[str | None, str]]] = []
    failure = CallError("x: server_error: overloaded", kind="server_error", status=529)

    def failing_summary(prompt, *, max_tokens, on_text=None):
        seen.append([(r.kind, r.state) for r in ledger.calls(session_id=session.id)])
        raise failure

    backend.call = failing_summary
    try:
        session.compact()
    except CallError as error:
        assert error is failure
    else:
        raise AssertionError("the failed summary call was not raised")
    assert seen and seen[0][-1] == ("compaction", "pending")
    last = ledger.calls(session_id=session.id)[-1]
    assert (last.kind, last.state) == ("compaction", "done") and "overloaded" in last.error
    assert session.transcript.messages[0].content[0].text == "Run two commands."  # history unchanged
