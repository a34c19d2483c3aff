"""SVG snapshots of the main screen and the two dialogs (pytest-textual-snapshot).

Everything on screen is fixed: the scripted model, the fixed dynamic context, a frozen clock for
the TTL countdown, a fixed terminal size, and no cursor blink. Regenerate deliberately with
`pytest tests/tui/test_tui_snapshots.py --snapshot-update` after checking the report.
"""

from __future__ import annotations

import threading

from tui_helpers import SPEC, submit, wait_until
from tui_session_script import THREE_TURNS, WORKDAY_TURNS, run_three_turns, run_workday

from hitrate.harness.checkpoints import Checkpoints

from hitrate.tui.dialogs import ApprovalScreen, ConfirmScreen
from hitrate.tui.prompt_input import PromptInput

SIZE = (120, 36)


def no_blink(app) -> None:
    app.query_one(PromptInput).cursor_blink = False


def test_main_screen_after_three_turns(make_app, clock, snap_compare):
    app = make_app({SPEC: list(THREE_TURNS)})

    async def run_before(pilot) -> None:
        no_blink(app)
        await run_three_turns(pilot)
        clock.advance(100)
        app.refresh_figures()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def _workday_then(app, clock):
    async def run_before(pilot) -> None:
        no_blink(app)
        await run_workday(pilot)
        clock.advance(100)
        app.refresh_figures()
        await pilot.pause()

    return run_before


def test_main_screen_at_80x24(make_app, clock, workspace, tmp_path, snap_compare):
    """A pasted trace, a file mention and an undo at 80×24: the compact cache panel, and the
    status bar keeps cost, Σ-hit and the cache clock."""
    app = make_app({SPEC: list(WORKDAY_TURNS)}, checkpoints=Checkpoints(workspace, tmp_path / "checkpoints"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=_workday_then(app, clock))


def test_main_screen_at_160x45(make_app, clock, workspace, tmp_path, snap_compare):
    app = make_app({SPEC: list(WORKDAY_TURNS)}, checkpoints=Checkpoints(workspace, tmp_path / "checkpoints"))
    assert snap_compare(app, terminal_size=(160, 45), run_before=_workday_then(app, clock))


def test_model_switch_dialog(make_app, snap_compare):
    app = make_app({SPEC: list(THREE_TURNS[:2])})

    async def run_before(pilot) -> None:
        no_blink(app)
        await submit(pilot, "Why does test_add fail?")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the turn")
        await submit(pilot, "/model openai/gpt-5.4")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_approval_dialog(make_app, snap_compare):
    app = make_app({SPEC: [THREE_TURNS[2]]}, approvals=True)

    async def run_before(pilot) -> None:
        no_blink(app)
        await submit(pilot, "Fix it")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval dialog")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


COMPAT = "openai-compat/qwen2.5-coder-1.5b@http://127.0.0.1:8000/v1"


def _streaming(app, clock, gate):
    """A turn held after its first tokens, 14 s after the request went out (a local server)."""

    async def run_before(pilot) -> None:
        no_blink(app)
        await submit(pilot, "Why does test_add fail?")
        backend = next(iter(app.link.router.backends.values()))
        await wait_until(pilot, lambda: backend.waiting.is_set() and app.activity.what == "writing", "the first tokens")
        clock.advance(14)
        app.refresh_figures()
        await pilot.pause()

    return run_before


def _held_reply(gate) -> list[dict]:
    return [{"text": "Let me read `calc.py` and run the failing test before changing anything.", "gate": gate}]


def test_streaming_at_80x24(make_app, clock, snap_compare):
    """What the agent does, for how long and the tokens so far: first on the status bar."""
    gate = threading.Event()
    app = make_app({COMPAT: _held_reply(gate)}, spec=COMPAT)
    try:
        assert snap_compare(app, terminal_size=(80, 24), run_before=_streaming(app, clock, gate))
    finally:
        gate.set()


def test_streaming_at_120x40(make_app, clock, snap_compare):
    gate = threading.Event()
    app = make_app({COMPAT: _held_reply(gate)}, spec=COMPAT)
    try:
        assert snap_compare(app, terminal_size=(120, 40), run_before=_streaming(app, clock, gate))
    finally:
        gate.set()


def _cost_after_three_turns(app, clock):
    async def run_before(pilot) -> None:
        no_blink(app)
        await run_three_turns(pilot)
        await submit(pilot, "/cost")
        await pilot.pause(0.3)
        clock.advance(100)
        app.refresh_figures()
        await pilot.pause()

    return run_before


def test_cost_at_80x24(make_app, clock, snap_compare):
    app = make_app({SPEC: list(THREE_TURNS)})
    assert snap_compare(app, terminal_size=(80, 24), run_before=_cost_after_three_turns(app, clock))


def test_cost_at_120x40(make_app, clock, snap_compare):
    app = make_app({SPEC: list(THREE_TURNS)})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_cost_after_three_turns(app, clock))
