"""The agent loop end to end with a scripted model: project -> call -> record -> tools -> append."""

from __future__ import annotations

import json
import threading

import pytest
from scripted_model import scripted_route

from hitrate.harness.agent import INTERRUPTED_NOTE, Agent, AgentLimits, is_closing_note
from hitrate.harness.events import (
    CallRecorded,
    EpochStarted,
    EventList,
    Finished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from hitrate.harness.policy import RecordedToolCall, RecordedTurn, ReplayPolicy
from hitrate.harness.retry import RetryPolicy
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.wire.types import CallError
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolResultBlock, UserMessage

FIX = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}


def fixed_context() -> dict[str, str]:
    return {"date": "2026-01-02", "workspace": "ws"}


def make_session(route, workspace, ledger, events, **config) -> Session:
    return Session(route, workspace, ledger=ledger, sink=events, context=fixed_context,
                   config=SessionConfig(**config), sleep=lambda s: None)


def test_loop_runs_tools_records_every_call_and_stops_on_end_turn(workspace, ledger):
    route = scripted_route([
        {"text": "Let me look.", "tool_calls": [("read_file", '{"path": "calc.py"}')]},
        {"tool_calls": [("edit_file", json.dumps(FIX)), ("shell", '{"command": "python -c \\"import calc; print(calc.add(2, 3))\\""}')]},
        {"text": "Fixed: add now adds."},
    ])
    events = EventList()
    session = make_session(route, workspace, ledger, events)
    result = Agent(session).run("Fix the add function in calc.py")

    assert result.status == "end_turn"
    assert result.steps == 3
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # Tool results went back to the model: the third prompt carries the shell output "5".
    third = route.backend.prompts[2]
    results = [b for m in third.messages if isinstance(m, UserMessage) for b in m.content if isinstance(b, ToolResultBlock)]
    assert [r.is_error for r in results] == [False, False, False]
    assert "5" in results[-1].content

    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 3
    assert all(r.error is None and r.backend == "openai-compat" and r.model == "scripted" for r in rows)
    # Each row carries the prompt's section hashes; every request extends the previous one.
    for earlier, later in zip(rows, rows[1:]):
        assert later.section_hashes[: len(earlier.section_hashes)] == earlier.section_hashes
    # ... and the per-section facts the what-if replay needs, agreeing with those hashes.
    for row in rows:
        assert row.sections is not None
        assert [s.hash for s in row.sections] == row.section_hashes
        assert [s.kind for s in row.sections[:3]] == ["tools", "system", "docs"]
    assert rows[0].miss_reason == "cold"
    assert rows[1].miss_reason is None and rows[2].miss_reason is None  # hits
    assert rows[1].usage.cache_read > 0 and rows[1].usage.cache_read == route.backend.prompts[0].total_tokens

    started = events.of(ToolCallStarted)
    assert [e.name for e in started] == ["read_file", "edit_file", "shell"]
    assert all(not e.is_error for e in events.of(ToolCallFinished))
    assert "".join(e.text for e in events.of(TextDelta)) == "Let me look.Fixed: add now adds."
    assert len(events.of(CallRecorded)) == 3
    finished = events.of(Finished)[-1]
    assert finished.status == "end_turn" and finished.summary["calls"] == 3
    assert result.summary.totals.cache_read == sum(r.usage.cache_read for r in rows)
    ratio = sum(r.usage.cache_read for r in rows) / sum(r.usage.prompt_tokens for r in rows)
    assert result.summary.hit_ratio == pytest.approx(ratio)


def test_dynamic_context_is_sent_once_and_frozen(workspace, ledger):
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}, {"text": "done"}])
    session = make_session(route, workspace, ledger, EventList())
    Agent(session, limits=AgentLimits(show_budget=False)).run("look around")
    first, second = route.backend.prompts
    assert first.tail is not None and "2026-01-02" in first.tail.text
    assert second.tail is None  # nothing changed: no new context block
    # The first request's whole prompt is a prefix of the second's.
    assert second.section_hashes()[: len(first.sections)] == first.section_hashes()


def test_bad_tool_arguments_go_back_as_error_results(workspace, ledger):
    route = scripted_route([
        {"tool_calls": [("read_file", '{"path": 3'), ("no_such_tool", "{}"), ("read_file", '{"path": "../etc/passwd"}')]},
        {"text": "ok"},
    ])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("go")
    assert result.status == "end_turn"
    finished = events.of(ToolCallFinished)
    assert [e.is_error for e in finished] == [True, True, True]
    assert "not valid JSON" in finished[0].content and "unknown tool" in finished[1].content


def test_step_limit(workspace, ledger):
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}] * 5)
    result = Agent(make_session(route, workspace, ledger, EventList()), limits=AgentLimits(max_steps=2)).run("loop")
    assert result.status == "max_steps" and result.steps == 2
    assert len(ledger.calls()) == 2


def test_cost_limit_stops_before_the_next_call(workspace, ledger):
    from hitrate.store.prices import PriceTable

    # A price table that knows the scripted model: $100 / 1M input, $10 / 1M cached, $200 / 1M output.
    table = PriceTable.from_json(json.dumps({
        "as_of": "2026-01-01",
        "models": [{"model": "scripted", "provider": "other", "writes_billed": False, "cache_mechanism": "none",
                    "schedules": [{"as_of": "2026-01-01", "source": "test",
                                   "tiers": [{"input": 100.0, "output": 200.0, "read": 10.0}]}]}],
    }))
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}] * 20)
    session = Session(route, workspace, ledger=ledger, context=fixed_context, price_table=table, sleep=lambda s: None)
    first_call_cost = None

    def sink(event):
        nonlocal first_call_cost
        if isinstance(event, CallRecorded) and first_call_cost is None:
            first_call_cost = event.cost_usd

    session.sink = sink
    probe = Agent(session, limits=AgentLimits(max_steps=1)).run("probe")
    assert probe.status == "max_steps" and first_call_cost is not None and first_call_cost > 0
    # The session goes on from where the probe stopped (after a tool round); enough budget for about
    # a few more calls (later calls read the prefix from the cache, so they cost far less).
    limit = session.spent_usd + first_call_cost * 0.3
    result = Agent(session, limits=AgentLimits(max_cost_usd=limit)).run("spend")
    assert result.status == "max_cost" and 1 <= result.steps < 15
    rows = ledger.calls(session_id=session.id)
    assert all(r.cost_usd is not None and r.price_snapshot_id == table.id for r in rows)
    spent = sum(r.cost_usd for r in rows)
    # Stopped before the call that would have crossed it: the last cached call's cost is the estimate.
    cached = [r.cost_usd for r in rows if not r.miss_reason]
    assert spent <= limit < spent + cached[-1]
    assert f"spent ${spent:.4f}; the next call would cost about ${cached[-1]:.4f}" in result.detail


def test_wall_time_limit(workspace, ledger):
    ticks = iter([0.0, 0.0, 5.0, 11.0, 20.0])
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}] * 5)
    agent = Agent(make_session(route, workspace, ledger, EventList()), limits=AgentLimits(max_wall_s=10),
                  clock=lambda: next(ticks))
    result = agent.run("slow")
    assert result.status == "max_wall" and result.steps == 2


def test_cancel_between_steps_keeps_recorded_calls(workspace, ledger):
    cancel = threading.Event()
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}, {"text": "never sent"}])
    events = EventList()
    session = make_session(route, workspace, ledger, events)

    def sink(event):
        events(event)
        if isinstance(event, CallRecorded) and event.step == 1:
            cancel.set()

    session.sink = sink
    result = Agent(session, cancel=cancel).run("go")
    # The tool round finished (the transcript stays valid), then no further call was made; the
    # unanswered turn is closed with a note, so a next prompt can follow.
    assert result.status == "cancelled"
    *_, results, note = session.transcript.messages
    assert isinstance(results, UserMessage) and results.tool_results
    assert isinstance(note, AssistantMessage) and note.content[0].text == INTERRUPTED_NOTE
    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 1 and rows[0].error is None
    assert len(route.backend.prompts) == 1


def test_cancel_mid_stream_records_the_interrupted_call(workspace, ledger):
    cancel = threading.Event()
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}, {"text": "streaming text"}])
    events = EventList()
    session = make_session(route, workspace, ledger, events)

    def sink(event):
        events(event)
        if isinstance(event, TextDelta) and event.step == 2:
            cancel.set()  # the user presses stop while the reply streams

    session.sink = sink
    result = Agent(session, cancel=cancel).run("go")
    assert result.status == "cancelled"
    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 2
    assert rows[0].error is None
    assert rows[1].error is not None and rows[1].error.startswith("cancelled")
    assert result.summary.calls == 1 and result.summary.failed_calls == 1


def test_keyboard_interrupt_in_a_tool_answers_every_call(workspace, ledger, monkeypatch):
    route = scripted_route([{"tool_calls": [("list_dir", "{}"), ("list_dir", "{}")]}])
    session = make_session(route, workspace, ledger, EventList())

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session.inputs.tools, "execute", boom)
    result = Agent(session).run("go")
    assert result.status == "cancelled"
    last = session.transcript.messages[-2]
    assert isinstance(last, UserMessage) and len(last.tool_results) == 2
    assert all(r.is_error for r in last.tool_results)
    assert session.transcript.messages[-1].content[0].text == INTERRUPTED_NOTE
    assert len(ledger.calls()) == 1


def test_failed_call_is_recorded_with_its_error(workspace, ledger):
    route = scripted_route([CallError("bad model name", kind="client_error", status=400)])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("go")
    assert result.status == "error" and "bad model name" in result.detail
    rows = ledger.calls()
    assert len(rows) == 1 and "bad model name" in rows[0].error and rows[0].attempt == 1 and rows[0].retry_of is None
    assert rows[0].usage.fresh_input is None  # unknown, not 0
    assert events.of(CallRecorded)[0].error is not None


def test_retryable_failures_are_retried_then_succeed(workspace, ledger):
    slept: list[float] = []
    route = scripted_route([
        CallError("slow down", kind="rate_limited", status=429, retry_after_s=2.0),
        CallError("overloaded", kind="overloaded", status=529),
        {"text": "done"},
    ])
    session = Session(route, workspace, ledger=ledger, context=fixed_context, sleep=slept.append,
                      config=SessionConfig(retry=RetryPolicy(base_delay_s=1.0)))
    result = Agent(session).run("go")
    assert result.status == "end_turn"
    assert slept[0] == 2.0 and 0 <= slept[1] <= 2.0
    # Three requests, three rows: the two failed attempts carry their errors and no usage, and
    # name the first attempt's row, so totals count the served call once.
    first, second, served = ledger.calls()
    assert [r.attempt for r in (first, second, served)] == [1, 2, 3]
    assert first.retry_of is None and second.retry_of == served.retry_of == first.id
    assert "slow down" in first.error and "overloaded" in second.error and served.error is None
    assert first.usage.prompt_tokens is None and second.usage.output is None
    totals = ledger.totals(session_id=session.id)
    assert totals.calls == 3 and totals.failed_calls == 2 and totals.output == served.usage.output


def test_replay_policy_sends_real_requests_but_appends_recorded_turns(workspace, ledger):
    # The "model" answers nonsense; the transcript follows the script.
    route = scripted_route([{"text": "garbage 1"}, {"text": "garbage 2"}, {"text": "garbage 3"}])
    policy = ReplayPolicy([
        RecordedTurn(text="reading", tool_calls=[RecordedToolCall(name="read_file", arguments={"path": "calc.py"})]),
        RecordedTurn(text="all good"),
    ])
    events = EventList()
    session = make_session(route, workspace, ledger, events)
    result = Agent(session, policy=policy).run("check calc")
    assert result.status == "end_turn" and result.steps == 2
    assistants = [m for m in session.transcript.messages if isinstance(m, AssistantMessage)]
    assert [c.name for c in assistants[0].tool_calls] == ["read_file"]
    assert assistants[0].tool_calls[0].arguments == '{"path":"calc.py"}'
    assert "garbage" not in json.dumps([m.model_dump() for m in session.transcript.messages])
    assert len(route.backend.prompts) == 2 and len(ledger.calls()) == 2


def test_model_switch_is_an_epoch_with_its_cache_cost(workspace, ledger):
    first = scripted_route([{"tool_calls": [("list_dir", "{}")]}, {"text": "half done"}], model="model-a")
    events = EventList()
    session = make_session(first, workspace, ledger, events)
    Agent(session).run("part one")
    second = scripted_route([{"text": "all done"}], model="model-b")
    session.switch_model(second, reason="user chose model-b")
    assert first.backend.closed
    result = Agent(session).run("part two")
    epochs = events.of(EpochStarted)
    assert [e.number for e in epochs] == [0, 1]
    assert "model-a -> model-b" in epochs[1].reason and epochs[1].changes == ["model"]
    rows = ledger.calls(session_id=session.id)
    assert rows[-1].model == "model-b" and rows[-1].miss_reason == "model_changed"
    # The session's third call: epochs count calls across the session, not within one run.
    assert result.summary.epochs[1].first_step == 3 and result.summary.epochs[1].miss_tokens == rows[-1].miss_tokens


def test_continuing_a_session_keeps_it_append_only(workspace, ledger):
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}, {}, {"text": "ok"}, {"text": "fine"}])
    session = make_session(route, workspace, ledger, EventList())
    # Stopped between the tool round and the next call: the turn is closed with a note saying why,
    # and the next prompt follows it.
    assert Agent(session, limits=AgentLimits(max_steps=1)).run("one").status == "max_steps"
    result = Agent(session).run("two")
    assert result.status == "end_turn" and "empty reply" in result.detail
    results, note, two = route.backend.prompts[1].messages[2:5]
    assert [b.type for b in results.content] == ["tool_result"]
    assert note.content[0].text == "[stopped by a limit: reached the limit of 1 model calls]"
    assert two.content[0].text == "two"
    # The empty reply left a sent, unanswered user turn: a placeholder turn keeps roles alternating.
    assert Agent(session).run("three").status == "end_turn"
    texts = [b.text for m in session.transcript.messages if isinstance(m, AssistantMessage)
             for b in m.content if isinstance(b, TextBlock)]
    assert "(no reply)" in texts
    prompts = route.backend.prompts
    for earlier, later in zip(prompts, prompts[1:]):
        assert later.section_hashes()[: len(earlier.sections)] == earlier.section_hashes()


def test_ctrl_c_during_a_call_is_recorded_and_ends_cleanly(workspace, ledger):
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}, KeyboardInterrupt()])
    events = EventList()
    result = Agent(make_session(route, workspace, ledger, events)).run("go")
    assert result.status == "cancelled"
    rows = ledger.calls()
    assert [r.error is None for r in rows] == [True, False] and rows[1].error.startswith("cancelled")
    assert events.of(Finished)[-1].status == "cancelled"


def test_closing_notes_are_told_apart_from_the_model_s_turns(workspace, ledger):
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}])
    session = make_session(route, workspace, ledger, EventList())
    Agent(session, limits=AgentLimits(max_steps=1)).run("look")
    *_, tool_turn, results, note = session.transcript.messages
    assert is_closing_note(note) and not is_closing_note(tool_turn) and not is_closing_note(results)
    assert not is_closing_note(AssistantMessage(content=(TextBlock(text="[stopped by a limit: mine]"), TextBlock(text="x"))))
