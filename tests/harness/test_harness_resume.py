"""Sessions stored in the ledger as they go, and resumed from it: same id and cache key, same
transcript, totals and epochs, and the first call after the resume explained against the last."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from scripted_model import scripted_route

from hitrate.harness.agent import INTERRUPTED_NOTE, Agent, AgentLimits
from hitrate.harness.events import CallRecorded, EpochStarted, EventList, TextDelta
from hitrate.harness.resume import SessionNotResumable, load_session, resumable_sessions
from hitrate.harness.session import NO_REPLY_NOTE, Session
from hitrate.harness.transcript_log import read_transcript
from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector
from hitrate.projection.transcript import AssistantMessage, UserMessage

T0 = datetime(2026, 3, 4, 9, 0, tzinfo=timezone.utc)
# An automatic prefix cache with a 5-minute lifetime that routes on prompt_cache_key (OpenAI's).
RULES = CacheRules(family="openai_implicit")
LIMITS = AgentLimits(show_budget=False)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def fixed_context() -> dict[str, str]:
    return {"date": "2026-03-04", "workspace": "ws"}


def open_session(route, workspace, ledger, clock, events=None) -> Session:
    return Session(route, workspace, ledger=ledger, sink=events or EventList(), context=fixed_context, clock=clock,
                   sleep=lambda s: None)


def resume(session_id, route, ledger, clock, events=None, workspace=None) -> Session:
    return Session.resume(ledger, session_id, route, workspace, sink=events or EventList(), context=fixed_context,
                          clock=clock, sleep=lambda s: None)


def texts(messages) -> list[str]:
    return [b.text for m in messages for b in m.content if getattr(b, "type", "") == "text"]


def hashes(session: Session, transcript) -> list[str]:
    inputs = session.inputs
    prompt = Projector(RULES, session_id=session.id).project(
        model="scripted", tools=inputs.tool_specs, system=inputs.system, transcript=transcript, docs=inputs.docs
    )
    return prompt.section_hashes()


def test_the_transcript_is_stored_entry_by_entry_and_reads_back_byte_exact(workspace, ledger):
    route = scripted_route([{"text": "Let me look.", "tool_calls": [("read_file", '{"path":  "calc.py"}')]},
                            {"text": "It subtracts: `a - b`. ✓"}], rules=RULES)
    session = open_session(route, workspace, ledger, Clock())
    Agent(session, limits=LIMITS).run("What does add do?")

    entries = ledger.messages(session.id)
    # The prompt, the head its request was built from (once it was accepted), the context sent with
    # it, the reply with its tool call, the tool result, the answer.
    assert [e.kind for e in entries] == ["user", "head", "context", "assistant", "user", "assistant"]
    stored = read_transcript(entries)
    assert stored.transcript == session.transcript and stored.next_seq == 6
    # The tool call's argument text is kept as the model wrote it (two spaces), so the stored
    # transcript projects to the very same bytes.
    assert stored.transcript.messages[1].tool_calls[0].arguments == '{"path":  "calc.py"}'
    assert hashes(session, stored.transcript) == hashes(session, session.transcript)
    record = ledger.get_session(session.id)
    assert record.workspace == str(workspace.resolve()) and record.model_spec == route.label


def test_resume_within_the_ttl_is_the_same_session_and_its_first_call_a_hit(workspace, ledger):
    clock = Clock()
    route = scripted_route([{"tool_calls": [("list_dir", "{}")]}, {"text": "Two files."}, {"text": "Still two."}], rules=RULES)
    first = open_session(route, workspace, ledger, clock)
    Agent(first, limits=LIMITS).run("What is here?")
    before = route.backend.prompts[-1]

    clock.advance(60)  # another process, a minute later, on the same (still warm) provider cache
    events = EventList()
    again = resume(first.id, route, ledger, clock, events)
    assert again.id == first.id and again.transcript == first.transcript
    assert len(again.records) == 2 and again.spent_usd == first.spent_usd
    assert again.epochs == first.epochs and len(again.epochs) == 1

    result = Agent(again, limits=LIMITS).run("And now?")
    rows = ledger.calls(session_id=first.id)
    assert len(rows) == 3 and rows[2].usage.cache_read > 0
    assert rows[2].miss_reason is None  # a hit against the last request, not "cold"
    after = route.backend.prompts[-1]
    assert after.prompt_cache_key == before.prompt_cache_key is not None  # same session, same routing key
    assert after.section_hashes()[: len(before.sections)] == before.section_hashes()  # append-only across the resume
    assert not events.of(EpochStarted) and [e.epoch for e in events.of(CallRecorded)] == [0]
    assert result.summary.calls == 3 and result.summary.totals.cache_read == sum(r.usage.cache_read for r in rows)


def test_first_call_after_a_long_gap_is_explained_as_ttl_expired(workspace, ledger):
    clock = Clock()
    first = open_session(scripted_route([{"text": "Hello."}], rules=RULES), workspace, ledger, clock)
    Agent(first, limits=LIMITS).run("hi")
    clock.advance(2 * 3600)
    # The next day's process: a new backend, whose provider has long dropped the entry.
    route = scripted_route([{"text": "Back.", "evicted": True}], rules=RULES)
    again = resume(first.id, route, ledger, clock)
    Agent(again, limits=LIMITS).run("still there?")
    rows = ledger.calls(session_id=first.id)
    assert [r.miss_reason for r in rows] == ["cold", "ttl_expired"]
    assert rows[1].started_at == T0 + timedelta(hours=2) and rows[1].miss_tokens > 0


def test_a_head_changed_since_the_session_was_saved_is_frozen_and_said(workspace, ledger):
    clock = Clock()
    route = scripted_route([{"text": "Read it."}, {"text": "Noted."}], rules=RULES)
    first = open_session(route, workspace, ledger, clock)
    Agent(first, limits=LIMITS).run("read AGENTS.md")
    (workspace / "AGENTS.md").write_text("Run `pytest -q` to check.\n")  # edited between the two sittings

    events = EventList()
    again = resume(first.id, route, ledger, clock, events)
    assert again.head_notice is not None and "the project docs (AGENTS.md) changed" in again.head_notice
    assert "--refresh-docs" in again.head_notice
    Agent(again, limits=LIMITS).run("again")
    assert not events.of(EpochStarted)  # the recorded head, byte for byte: no new epoch
    first_prompt, last_prompt = route.backend.prompts[0], route.backend.prompts[-1]
    assert last_prompt.docs == first_prompt.docs and "pytest -q" not in last_prompt.docs
    assert last_prompt.section_hashes()[:3] == first_prompt.section_hashes()[:3]
    assert ledger.calls(session_id=first.id)[-1].miss_reason is None


def test_refreshing_the_head_on_resume_starts_an_epoch_and_is_the_miss_reason(workspace, ledger):
    clock = Clock()
    route = scripted_route([{"text": "Read it."}, {"text": "Noted.", "evicted": True}], rules=RULES)
    first = open_session(route, workspace, ledger, clock)
    Agent(first, limits=LIMITS).run("read AGENTS.md")
    (workspace / "AGENTS.md").write_text("Run `pytest -q` to check.\n")

    events = EventList()
    again = Session.resume(ledger, first.id, route, sink=events, context=fixed_context, clock=clock,
                           sleep=lambda s: None, refresh_head=True)
    assert again.head_notice is None
    Agent(again, limits=LIMITS).run("again")
    (epoch,) = events.of(EpochStarted)
    assert epoch.number == 1 and epoch.changes == ["docs"] and "refreshed on resume: the project docs (AGENTS.md)" in epoch.reason
    assert "pytest -q" in route.backend.prompts[-1].docs
    row = ledger.calls(session_id=first.id)[-1]
    assert row.miss_reason == "prefix_changed(docs, changed since the session was saved)"
    assert [e.number for e in again.epochs] == [0, 1] and again.epoch_of_call[row.id] == 1
    # The new head is recorded: a later resume goes on from it.
    later = resume(first.id, route, ledger, clock)
    assert later.head_notice is None and "pytest -q" in later.inputs.docs


def test_model_switch_is_stored_and_epochs_are_restored(workspace, ledger):
    clock = Clock()
    first = open_session(scripted_route([{"text": "On a."}], model="model-a", rules=RULES), workspace, ledger, clock)
    Agent(first, limits=LIMITS).run("one")
    route_b = scripted_route([{"text": "On b."}, {"text": "Still b."}], model="model-b", rules=RULES)
    first.switch_model(route_b, reason="user chose model-b")
    Agent(first, limits=LIMITS).run("two")

    assert load_session(ledger, first.id).stored.model_spec == route_b.label
    events = EventList()
    again = resume(first.id, route_b, ledger, clock, events)
    assert [(e.number, e.first_step) for e in again.epochs] == [(0, 1), (1, 2)]
    # As the live session showed it: the stored switch keeps its reason.
    assert again.epochs[1].reason == first.epochs[1].reason == "user chose model-b: model model-a -> model-b"
    Agent(again, limits=LIMITS).run("three")
    assert not events.of(EpochStarted)  # the resumed session goes on in epoch 1
    assert [e.epoch for e in events.of(CallRecorded)] == [1]
    assert ledger.calls(session_id=first.id)[-1].miss_reason is None


def test_a_cancelled_turn_is_closed_and_the_resumed_session_goes_on_after_it(workspace, ledger):
    cancel = threading.Event()
    route = scripted_route([{"text": "streaming a long answer"}, {"text": "Resumed."}], rules=RULES)
    events = EventList()
    first = open_session(route, workspace, ledger, Clock(), events)

    def sink(event):
        events(event)
        if isinstance(event, TextDelta):
            cancel.set()

    first.sink = sink
    assert Agent(first, limits=LIMITS, cancel=cancel).run("go").status == "cancelled"
    stored = load_session(ledger, first.id).stored.transcript
    assert texts(stored.messages) == ["go", INTERRUPTED_NOTE]

    again = resume(first.id, route, ledger, Clock())
    assert Agent(again, limits=LIMITS).run("once more").status == "end_turn"
    assert texts(route.backend.prompts[-1].messages) == ["go", INTERRUPTED_NOTE, "once more"]


def test_a_turn_cut_off_by_a_crash_is_closed_when_the_next_prompt_comes(workspace, ledger):
    route = scripted_route([{"text": "Here."}], rules=RULES)
    crashed = open_session(route, workspace, ledger, Clock())
    crashed.add_user_message("sent just before the crash")  # stored before any request went out

    again = resume(crashed.id, route, ledger, Clock())
    assert isinstance(again.transcript.messages[-1], UserMessage)
    Agent(again, limits=LIMITS).run("are you there?")
    messages = route.backend.prompts[-1].messages
    assert texts(messages) == ["sent just before the crash", NO_REPLY_NOTE, "are you there?"]
    assert isinstance(messages[1], AssistantMessage)


def test_sessions_that_cannot_be_resumed_say_why(workspace, ledger):
    with pytest.raises(SessionNotResumable, match="no saved transcript for session nope") as raised:
        resume("nope", scripted_route([]), ledger, Clock(), workspace=workspace)
    assert "no such session" in str(raised.value)
    ledger.start_session(session_id="old", workspace=str(workspace))
    with pytest.raises(SessionNotResumable, match="no stored messages"):
        resume("old", scripted_route([]), ledger, Clock())


def test_resumable_sessions_lists_stored_transcripts_newest_first(workspace, ledger):
    clock = Clock()
    ids = []
    for prompt in ("first task", "second task"):
        session = open_session(scripted_route([{"text": "ok"}], rules=RULES), workspace, ledger, clock)
        Agent(session, limits=LIMITS).run(prompt)
        ids.append(session.id)
    ledger.start_session(session_id="no-transcript")
    listed = resumable_sessions(ledger)
    assert [s.id for s in listed] == ids[::-1]
    assert [s.first_prompt for s in listed] == ["second task", "first task"] and all(s.calls == 1 for s in listed)
    assert [s.id for s in resumable_sessions(ledger, exclude=[ids[1]])] == [ids[0]]
