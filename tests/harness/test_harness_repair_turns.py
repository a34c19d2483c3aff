"""Repair turns, nudges and the reason a run ended, with the scripted model: what the model is
told, that it is appended (every request extends the last), recorded and counted."""

from __future__ import annotations

import io
import json

from scripted_model import scripted_route

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList, Finished, HarnessTurn
from hitrate.harness.printer import TerminalPrinter
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.transcript_log import KIND_USER
from hitrate.projection.transcript import TextBlock, UserMessage

FIX = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
TEXT_CALL = '```json\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n```'


def make_session(route, workspace, ledger, sink) -> Session:
    return Session(route, workspace, ledger=ledger, sink=sink, context=lambda: {"date": "2026-01-02"},
                   config=SessionConfig(), sleep=lambda s: None)


def assert_append_only(route) -> None:
    prompts = route.backend.prompts
    for earlier, later in zip(prompts, prompts[1:]):
        hashes = [s.hash for s in earlier.sections if s.kind != "tail"]
        assert [s.hash for s in later.sections][: len(hashes)] == hashes


def test_a_call_written_as_text_gets_one_repair_turn_then_the_run_goes_on(workspace, ledger):
    route = scripted_route([
        {"text": TEXT_CALL},
        {"tool_calls": [("edit_file", json.dumps(FIX))]},
        {"text": "Fixed."},
    ])
    events = EventList()
    session = make_session(route, workspace, ledger, events)
    result = Agent(session).run("Fix add in calc.py")

    assert result.status == "end_turn" and result.detail == "the model ended its turn"
    assert result.steps == 3 and result.harness_turns == {"repair": 1}
    assert (workspace / "calc.py").read_text().endswith("return a + b\n")
    [repair] = events.of(HarnessTurn)
    assert repair.kind == "repair" and repair.step == 1
    assert "`read_file` written as text" in repair.reason
    assert "read_file" in repair.text and "shell" in repair.text
    # The repair is a user turn after the model's reply: the next request carries it last.
    second = route.backend.prompts[1]
    last = second.messages[-1]
    assert isinstance(last, UserMessage) and repair.text in "".join(b.text for b in last.content if isinstance(b, TextBlock))
    assert_append_only(route)
    # Stored in the ledger like any turn.
    stored = [m for m in ledger.messages(session.id) if m.kind == KIND_USER]
    assert any(repair.text in json.dumps(json.loads(m.body), ensure_ascii=False) for m in stored)
    assert events.of(Finished)[-1].harness_turns == {"repair": 1}


def test_a_second_call_shaped_reply_ends_the_run_and_says_so(workspace, ledger):
    route = scripted_route([
        {"text": '{"name": "deep_merge", "arguments": {"a": {}, "b": {}}}'},
        {"text": 'deep_merge({}, {})'},
    ])
    out = io.StringIO()
    session = make_session(route, workspace, ledger, TerminalPrinter(out, colour=False))
    result = Agent(session).run("Write deep_merge")

    assert result.status == "end_turn"
    assert result.detail.startswith("the repair turn did not produce a call")
    assert "`deep_merge`, which is not one of your tools" in result.detail
    assert result.detail.endswith("does better with --tool-protocol text")
    assert result.harness_turns == {"repair": 1}
    text = out.getvalue()
    assert "[repair] a call of `deep_merge`, which is not one of your tools: " in text
    assert "ended: the repair turn did not produce a call" in text
    assert "harness turns: 1 repair" in text


def test_prose_after_a_repair_is_the_final_answer(workspace, ledger):
    route = scripted_route([{"text": TEXT_CALL}, {"text": "I cannot do this."}])
    result = Agent(make_session(route, workspace, ledger, EventList())).run("Fix add")
    assert result.detail == "the model ended its turn (after a repair turn)"


def test_an_ordinary_answer_gets_no_repair(workspace, ledger):
    route = scripted_route([{"text": "Nothing to do: add is correct."}])
    result = Agent(make_session(route, workspace, ledger, EventList())).run("Check add")
    assert result.steps == 1 and result.harness_turns == {} and result.detail == "the model ended its turn"


def test_each_stretch_without_a_call_gets_its_own_repair(workspace, ledger):
    route = scripted_route([
        {"text": TEXT_CALL},
        {"tool_calls": [("read_file", '{"path": "calc.py"}')]},
        {"text": TEXT_CALL},
        {"tool_calls": [("edit_file", json.dumps(FIX))]},
        {"text": "Fixed."},
    ])
    result = Agent(make_session(route, workspace, ledger, EventList())).run("Fix add")
    assert result.harness_turns == {"repair": 2} and result.steps == 5


def test_the_same_failing_call_repeated_gets_a_nudge_after_its_results(workspace, ledger):
    failing = ("shell", '{"command": "python -c \\"import sys; sys.exit(3)\\""}')
    route = scripted_route([
        {"tool_calls": [failing]},
        {"tool_calls": [failing]},
        {"text": "It keeps failing."},
    ])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("Run it")

    assert result.harness_turns == {"nudge": 1}
    [nudge] = events.of(HarnessTurn)
    assert nudge.kind == "nudge" and nudge.step == 2 and "2 times in a row" in nudge.text
    # The nudge follows the tool results in the same user turn: the third request ends with it.
    last = route.backend.prompts[2].messages[-1]
    assert isinstance(last, UserMessage)
    texts = [b for b in last.content if type(b) is TextBlock]
    assert [t.text for t in texts] == [nudge.text]
    assert not isinstance(last.content[0], TextBlock)  # the tool result comes first
    assert_append_only(route)


def test_a_failure_that_changes_gets_no_nudge(workspace, ledger):
    route = scripted_route([
        {"tool_calls": [("shell", '{"command": "exit 1"}')]},
        {"tool_calls": [("shell", '{"command": "exit 2"}')]},
        {"text": "done"},
    ])
    result = Agent(make_session(route, workspace, ledger, EventList())).run("Run it")
    assert result.harness_turns == {}


def test_a_limit_after_a_repair_closes_the_turn(workspace, ledger):
    route = scripted_route([{"text": TEXT_CALL}])
    session = make_session(route, workspace, ledger, EventList())
    result = Agent(session, limits=AgentLimits(max_steps=1)).run("Fix add")
    assert result.status == "max_steps" and result.harness_turns == {"repair": 1}
    # The transcript is valid to continue: it ends with the agent's closing note.
    assert session.transcript.messages[-1].role == "assistant"
