"""Keep-alive in the app: the warmer's state on the status line and in the cache panel, the warm-up
driven by the tick (a frozen clock moved by hand), its bar marked as keep-alive, /keepalive, and an
idle session that is not worth warming showing nothing extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import SPEC, FrozenClock, fixed_context, submit, wait_until
from scripted_model import ScriptedRouter

from hitrate.harness.agent import AgentLimits
from hitrate.harness.keepalive import KeepAliveConfig
from hitrate.store.ledger import Ledger
from hitrate.tui.app import HitrateApp
from hitrate.tui.cache_panel import CallBar, KeepAliveView
from hitrate.tui.commands import CommandError, parse_command
from hitrate.tui.conversation import NoticeLine
from hitrate.tui.harness_link import HarnessLink
from hitrate.tui.status import StatusLine

# The scripted session's prefix is a few thousand tokens: worth warming only for a user who is
# certain to come back. The default rule (15%, $0.01 margin) skips it.
EAGER = KeepAliveConfig(return_probability=1.0, learn_from_gaps=False, min_net_saving_usd=0.0)
TURN = [{"text": "Let me look.", "tool_calls": [("read_file", '{"path": "calc.py"}')]}, {"text": "It subtracts."}]
WARM_UP = {"text": "", "output": 1}


@pytest.fixture
def keepalive_app(ledger: Ledger, workspace: Path, clock: FrozenClock):
    links: list[HarnessLink] = []

    def make(script: list[dict], config: KeepAliveConfig | None = EAGER) -> HitrateApp:
        link = HarnessLink(SPEC, workspace, ledger.path, router=ScriptedRouter({SPEC: script}), context=fixed_context,
                           clock=clock, limits=AgentLimits(show_budget=False), keepalive=config)
        links.append(link)
        return HitrateApp(link, approvals=False, clock=clock, tick_s=None, workspace=workspace)

    yield make
    for link in links:
        link.close()


def status(app: HitrateApp) -> str:
    return app.query_one(StatusLine).full_text


def keepalive_line(app: HitrateApp) -> str | None:
    view = app.query_one(KeepAliveView)
    return str(view.render()) if view.display else None


async def one_turn(pilot, calls: int) -> None:
    await submit(pilot, "Why does test_add fail?")
    await wait_until(pilot, lambda: not pilot.app.busy and len(pilot.app.figures.calls) == calls, "the turn")


async def test_the_tick_warms_the_prefix_before_it_expires(keepalive_app, clock, ledger):
    app = keepalive_app([*TURN, WARM_UP])
    async with app.run_test(size=(120, 36)) as pilot:
        await one_turn(pilot, 2)
        session = app.link.session
        messages = len(session.transcript.messages)
        last_start = app.figures.last.started_at
        clock.advance(100)
        app.tick()
        assert app.figures.last is not None and len(app.figures.calls) == 2  # not due yet
        assert "keep-alive: next warm in 2:50 (saves ~$" in keepalive_line(app)
        assert f"{SPEC} │ ready · keep-alive in 2:50 │ 2 calls" in status(app)

        clock.advance(171)  # 4:31 after the last request started: due (4:30), not expired (5:00)
        app.tick()
        await wait_until(pilot, lambda: len(app.figures.calls) == 3 and not app.warming, "the warm-up")
        warm = app.figures.last
        assert warm.keepalive and warm.error is None and warm.usage.cache_read and warm.usage.output == 1
        bar = list(app.query(CallBar))[-1]
        assert bar.has_class("-keepalive") and "keep-alive · R " in str(bar.render())
        # The transcript is untouched; the ledger has the warm-up, tagged.
        assert len(session.transcript.messages) == messages
        assert [c.kind for c in ledger.calls(session_id=session.id)] == [None, None, "keepalive"]
        # The TTL countdown now runs from the warm-up's start, and the next warm-up is 4:30 after it.
        assert app.prefix_clock.anchor == clock.now != last_start
        assert "cache warm 5:00 (5m)" in status(app)
        assert "next warm in 4:30" in keepalive_line(app)
        # Read back from the ledger (/resume), the warm-up is still a keep-alive bar.
        resumed = app.link.resume(session.id)
        assert [c.kind for c in resumed.calls] == [None, None, "keepalive"]


def test_the_keepalive_command_takes_on_off_or_nothing():
    assert parse_command("/keepalive").arg == "" and parse_command("/keepalive OFF").arg == "OFF"
    with pytest.raises(CommandError, match="/keepalive \\[on\\|off\\]"):
        parse_command("/keepalive sometimes")


async def test_keepalive_off_says_what_it_would_save_and_sends_nothing(keepalive_app, clock):
    app = keepalive_app(list(TURN))
    async with app.run_test(size=(120, 36)) as pilot:
        await one_turn(pilot, 2)
        await submit(pilot, "/keepalive off")
        await pilot.pause()
        assert "keep-alive off" in [str(n.render()) for n in app.query(NoticeLine)][-1]
        clock.advance(275)
        app.tick()
        await pilot.pause()
        assert len(app.figures.calls) == 2 and not app.warming
        assert keepalive_line(app).startswith("keep-alive: off: turned off; a warm-up would save ~$")
        assert "│ ready · keep-alive off │" in status(app)
        await submit(pilot, "/keepalive")
        await pilot.pause()
        report = [m.source for m in app.query(".notice-md")][-1]
        assert report.startswith("**Keep-alive** is off") and "one warm-up costs $" in report


async def test_a_prefix_not_worth_warming_shows_nothing_until_asked(keepalive_app, clock):
    app = keepalive_app(list(TURN), config=KeepAliveConfig())
    async with app.run_test(size=(120, 36)) as pilot:
        await one_turn(pilot, 2)
        clock.advance(275)
        app.tick()
        await pilot.pause()
        assert len(app.figures.calls) == 2 and keepalive_line(app) is None and "keep-alive" not in status(app)
        await submit(pilot, "/keepalive")
        await pilot.pause()
        report = [m.source for m in app.query(".notice-md")][-1]
        assert report.startswith("**Keep-alive** is on (`/keepalive on|off`): not warming: saves too little: 15% ×")
        assert "(default; no gap this long yet)" in report and "off:" not in report
        await submit(pilot, "/keepalive on")
        await pilot.pause()
        assert "nothing will be warmed now: saves too little" in [str(n.render()) for n in app.query(NoticeLine)][-1]
        assert keepalive_line(app).startswith("keep-alive: not warming: saves too little")  # switched by the user: shown


async def test_a_turn_started_during_the_idle_stretch_needs_no_warm_up(keepalive_app, clock, ledger):
    app = keepalive_app([*TURN, {"text": "Fixed."}])
    async with app.run_test(size=(120, 36)) as pilot:
        await one_turn(pilot, 2)
        clock.advance(200)
        await one_turn(pilot, 3)
        clock.advance(75)  # 4:35 after the first turn, but 1:15 after the second one's request
        app.tick()
        await pilot.pause()
        assert not app.warming and len(app.figures.calls) == 3
        assert all(c.kind is None for c in ledger.calls(session_id=app.link.session_id))
