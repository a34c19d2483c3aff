"""A reply cut off at max_tokens: said so, and a truncated tool call is never run."""

from __future__ import annotations

import json

from scripted_model import scripted_route

from hitrate.harness.agent import CUT_OFF_TOOL_RESULT, Agent, is_closing_note
from hitrate.harness.events import EventList, ToolCallStarted
from hitrate.harness.session import Session, SessionConfig
from hitrate.projection.transcript import ToolResultBlock, UserMessage

ORIGINAL = "def add(a, b):\n    return a - b\n"
TRUNCATED_EDIT = '{"path": "calc.py", "old_string": "return a - b", "new_str'


def make_session(route, workspace, ledger, events) -> Session:
    return Session(route, workspace, ledger=ledger, sink=events, context=lambda: {"date": "2026-01-02"},
                   config=SessionConfig(max_output_tokens=64), sleep=lambda s: None)


def test_cut_off_text_reply_stops_with_max_tokens(workspace, ledger):
    route = scripted_route([{"text": "The answer is a very long", "stop_reason": "max_tokens"}])
    result = Agent(make_session(route, workspace, ledger, EventList())).run("Explain")
    assert result.status == "max_tokens"
    assert "cut off at the output limit of 64 tokens" in result.detail and "--max-output-tokens" in result.detail


def test_cut_off_tool_call_is_not_run_and_the_model_is_told(workspace, ledger):
    fix = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
    route = scripted_route([
        {"tool_calls": [("edit_file", TRUNCATED_EDIT)], "stop_reason": "max_tokens"},
        {"tool_calls": [("edit_file", json.dumps(fix))]},
        {"text": "Fixed."},
    ])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("Fix add")
    assert result.status == "end_turn" and result.steps == 3
    second = route.backend.prompts[1]
    answered = [b for m in second.messages if isinstance(m, UserMessage) for b in m.content if isinstance(b, ToolResultBlock)]
    assert len(answered) == 1 and answered[0].is_error and answered[0].content == CUT_OFF_TOOL_RESULT
    # Only the complete call ran.
    assert [e.arguments for e in events.of(ToolCallStarted)] == [json.dumps(fix)]


def test_two_cut_offs_in_a_row_stop_without_running_anything(workspace, ledger):
    route = scripted_route([
        {"tool_calls": [("edit_file", TRUNCATED_EDIT)], "stop_reason": "max_tokens"},
        {"tool_calls": [("edit_file", TRUNCATED_EDIT)], "stop_reason": "max_tokens"},
    ])
    events = EventList()
    session = make_session(route, workspace, ledger, events)
    result = Agent(session).run("Fix add")
    assert result.status == "max_tokens" and result.steps == 2
    assert (workspace / "calc.py").read_text() == ORIGINAL
    assert not events.of(ToolCallStarted)
    # Every call answered, and the turn closed with a note, so the next prompt can follow.
    assert is_closing_note(session.transcript.messages[-1])
