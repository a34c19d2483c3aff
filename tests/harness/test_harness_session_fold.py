"""A session is one fold over its ledger log: the state a live session holds after any sequence of
turns is the state `Session.resume` rebuilds from the ledger, and both explain the next call alike.

Random sessions mix text replies, tool rounds, model switches and gaps; after each, the live session
and a resumed copy are compared on what the log holds: transcript, calls, epochs, the last request,
and the miss label of one more identical call sent from each.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scripted_model import scripted_route

from hitrate.harness.agent import Agent, AgentLimits
from hitrate.harness.events import EventList
from hitrate.harness.session import Session
from hitrate.projection.caching import CacheRules
from hitrate.store.ledger import Ledger

RULES = CacheRules(family="openai_implicit", min_cacheable_tokens=0, prefix_granularity=1)
T0 = datetime(2026, 3, 4, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


turn = st.one_of(
    st.tuples(st.just("text"), st.integers(1, 3)),
    st.tuples(st.just("tools"), st.integers(1, 3)),
    st.tuples(st.just("switch"), st.just(0)),
    st.tuples(st.just("gap"), st.sampled_from([10, 400, 4000])),
)


def _script(kind: str, n: int) -> list[dict]:
    if kind == "tools":
        return [{"tool_calls": [("read_file", json.dumps({"path": "calc.py"}))] * n}, {"text": "read it"}]
    return [{"text": "ok " * n}]


def _state(session: Session) -> dict:
    previous = session.last_request
    return {
        "transcript": session.transcript.model_dump_json(),
        "calls": [record.id for _, record in session.records],
        "epochs": [(e.number, e.reason, e.model, e.first_step) for e in session.epochs],
        "previous": (previous.prompt.section_hashes(), previous.started_at) if previous else None,
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(turn, min_size=1, max_size=5))
def test_live_state_is_the_fold_of_the_ledger(workspace: Path, turns) -> None:
    assume(any(kind in ("text", "tools") for kind, _ in turns))  # a session never prompted has no log
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "ledger.db") as ledger:
        clock = Clock()
        models = ["model-a", "model-b"]
        route = scripted_route([], models[0], rules=RULES)
        session = Session(route, workspace, ledger=ledger, sink=EventList(), context=lambda: {"date": "d"}, clock=clock,
                          sleep=lambda s: None)
        for i, (kind, n) in enumerate(turns):
            if kind == "switch":
                models.reverse()
                session.switch_model(scripted_route([], models[0], rules=RULES), "switched by the test")
                continue
            if kind == "gap":
                clock.now += timedelta(seconds=n)
                continue
            session.route.backend.script.extend(_script(kind, n))
            Agent(session, limits=AgentLimits(show_budget=False)).run(f"task {i}")

        resumed = Session.resume(ledger, session.id, scripted_route([], models[0], rules=RULES), sink=EventList(),
                                 context=lambda: {"date": "d"}, clock=clock, sleep=lambda s: None)
        live, restored = _state(session), _state(resumed)
        assert restored == live

        # One more identical call from each (the resumed one on a copy of the ledger, so the two do
        # not write the same session twice): the same miss label and tokens missed.
        duplicate = Path(tmp) / "copy.db"
        with sqlite3.connect(ledger.path) as source, sqlite3.connect(duplicate) as target:
            source.backup(target)
        with Ledger(duplicate) as other:
            twin = Session.resume(other, session.id, scripted_route([], models[0], rules=RULES), sink=EventList(),
                                  context=lambda: {"date": "d"}, clock=clock, sleep=lambda s: None)
            # The provider's cache outlives the process: the twin talks to a copy of the same one.
            twin.route.backend._cache = copy.deepcopy(session.route.backend._cache)
            clock.now += timedelta(seconds=5)
            at = clock.now
            outcomes = []
            for s in (session, twin):
                clock.now = at
                s.route.backend.script.append({"text": "again"})
                result = Agent(s, limits=AgentLimits(show_budget=False)).run("once more")
                outcomes.append((result.status, s.records[-1][1].miss_reason, s.records[-1][1].miss_tokens))
            assert outcomes[0] == outcomes[1]
