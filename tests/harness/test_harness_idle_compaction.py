"""Idle compaction at the keep-alive's decision point: a session set to it, near its threshold,
compacts before its cached prefix expires (the summary call reading the history from the cache);
before the warm time, when off, or far from the threshold, nothing is sent."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from scripted_model import ScriptedModel, anthropic_spec
from test_harness_compaction import summarizing

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.idle_compaction import compact_if_idle, idle_compaction_decision
from hitrate.harness.keepalive import CacheWarmer, KeepAliveConfig
from hitrate.harness.router import Route, rules_for
from hitrate.harness.session import Session, SessionConfig
from hitrate.store.prices import PriceTable

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
MODEL = "claude-sonnet-4-6"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2)
        return self.now


def _reads(n: int) -> list[dict]:
    return [{"tool_calls": [("shell", json.dumps({"command": f"seq {i} 1500"}))]} for i in range(n)]


def _session(workspace, ledger, rounds: int, window: int, **config) -> tuple[Session, Clock]:
    spec = anthropic_spec(MODEL)
    table = PriceTable.default()
    rules, explain = rules_for(spec, table)
    clock = Clock()
    backend = ScriptedModel(_reads(rounds) + [{"text": "waiting for you"}], MODEL, wire="anthropic_messages",
                            rules=explain, clock=lambda: clock.now)
    route = summarizing(Route(spec=spec, backend=backend, rules=rules, explain_rules=explain))
    config = {"context_window": window, "clear_tool_results": False, **config}
    session = Session(route, workspace, ledger=ledger, sink=EventList(), context=lambda: {"date": "d"},
                      config=SessionConfig(**config), sleep=lambda s: None, clock=clock, price_table=table)
    result = Agent(session, limits=AgentLimits(max_steps=20, show_budget=False)).run("Run the commands one by one.")
    assert result.status == "end_turn", result.detail
    return session, clock


def test_an_idle_session_near_its_threshold_compacts_before_the_cache_expires(workspace, ledger) -> None:
    session, clock = _session(workspace, ledger, rounds=5, window=16_000, idle_compaction=True)
    warmer = CacheWarmer(KeepAliveConfig())
    last = clock.now
    early = clock.now + timedelta(seconds=60)
    assert idle_compaction_decision(session, early, warmer.decision(session, early), warmer.config) is None
    due = last + timedelta(seconds=280)
    keepalive = warmer.decision(session, due)
    decision = idle_compaction_decision(session, due, keepalive, warmer.config)
    assert decision is not None and decision.compact, decision
    session.route.backend.script.append({"text": "unused"})
    record = compact_if_idle(session, due, keepalive, warmer.config)
    assert record is not None and record.kind == "compaction"
    assert record.usage.cache_read / record.usage.prompt_tokens > 0.8  # read from the warm cache


def test_off_or_far_from_the_threshold_sends_nothing(workspace, ledger) -> None:
    warmer = CacheWarmer(KeepAliveConfig())
    for config, window in (({"idle_compaction": False}, 16_000), ({"idle_compaction": True}, 200_000)):
        session, clock = _session(workspace, ledger, rounds=5, window=window, **config)
        due = clock.now + timedelta(seconds=280)
        keepalive = warmer.decision(session, due)
        assert compact_if_idle(session, due, keepalive, warmer.config) is None
