"""Live and replayed, one cache: the miss labels a session records agree with the what-if replay of
the same calls read back from the ledger, through the same cache family.

A session on an Anthropic-style backend takes a few tool rounds, a break past the 5-minute TTL,
and more rounds. Every row's miss label, the replay's predicted read, and the read the backend
reported must tell the same story.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from scripted_model import ScriptedModel, anthropic_spec

from hitrate.evals.whatif.compare import WhatIfOptions, load_requests, parse_target, simulate
from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.router import Route, rules_for
from hitrate.harness.session import Session

MODEL = "claude-sonnet-5"


class SteppedClock:
    """Each call one second after the previous, plus whatever gap a test asks for."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def test_recorded_miss_labels_agree_with_the_replay_of_the_ledger(workspace, ledger) -> None:
    clock = SteppedClock()
    big = "x" * 9000  # a tool result long enough that the prompt passes the model's minimum
    script = [
        {"tool_calls": [("read_file", '{"path": "calc.py"}')]},
        {"tool_calls": [("shell", f'{{"command": "echo {big}"}}')]},
        {"text": "done"},
        {"tool_calls": [("read_file", '{"path": "calc.py"}')]},
        {"text": "done again"},
    ]
    spec = anthropic_spec(MODEL)
    rules, explain = rules_for(spec)
    backend = ScriptedModel(script, MODEL, wire="anthropic_messages", rules=explain, clock=lambda: clock.now)
    route = Route(spec=spec, backend=backend, rules=rules, explain_rules=explain)
    session = Session(route, workspace, ledger=ledger, context=lambda: {"date": "2026-11-30"}, clock=clock, sleep=lambda s: None)
    agent = Agent(session, limits=AgentLimits(max_steps=10))
    assert agent.run("Look at calc.py and run a long command.").status == "end_turn"
    clock.now += timedelta(minutes=6)  # past the 5-minute TTL
    assert agent.run("Once more, please.").status == "end_turn"

    rows = ledger.calls(session_id=session.id)
    assert len(rows) == 5
    replay = simulate(load_requests(ledger, session.id).requests, parse_target(f"anthropic/{MODEL}"), WhatIfOptions(marks="recorded"))
    for row, predicted in zip(rows, replay):
        assert predicted.usage.cache_read == row.usage.cache_read, row.id
    labels = [row.miss_reason for row in rows]
    assert labels[0] == "cold"
    assert labels[1:3] == [None, None]  # hits: nothing the previous request left was lost
    assert labels[3] == "ttl_expired" and rows[3].usage.cache_read == 0
    assert labels[4] is None and rows[4].usage.cache_read > 0
