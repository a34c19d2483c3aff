"""In-TUI /resume goes on where the session left off: its model and its workspace."""

from __future__ import annotations

import threading

from scripted_model import ScriptedRouter
from tui_helpers import SPEC, fixed_context, submit, wait_until

from hitrate.harness.agent import AgentLimits
from hitrate.harness.checkpoints import Checkpoints
from hitrate.tui.conversation import NoticeLine
from hitrate.tui.harness_link import HarnessLink
from hitrate.tui.status import StatusLine

HAIKU = "anthropic/claude-haiku-4-5"


def notices(app) -> list[str]:
    return [str(n.render()) for n in app.query(NoticeLine)]


async def test_resume_restores_the_sessions_model_and_workspace(make_app, ledger, tmp_path, clock):
    # A session that worked in another folder, on sonnet.
    other = tmp_path / "other-repo"
    other.mkdir()
    (other / "notes.md").write_text("# other\n")
    earlier = HarnessLink(SPEC, other, ledger.path, router=ScriptedRouter({SPEC: [{"text": "Done there."}]}),
                          context=fixed_context, clock=clock, limits=AgentLimits(max_steps=5, show_budget=False))
    try:
        earlier.run_turn("work there", lambda m: None, threading.Event(), lambda t, a: True)
        old_id = earlier.session_id
    finally:
        earlier.close()

    app = make_app({SPEC: [{"text": "Back on sonnet."}], HAIKU: [{"text": "On haiku."}]}, spec=HAIKU,
                   checkpoints=Checkpoints(tmp_path / "demo-repo", tmp_path / "store"))
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.link.model_label == HAIKU
        await submit(pilot, f"/resume {old_id}")
        await wait_until(pilot, lambda: any(f"resumed session {old_id}" in n for n in notices(app)), "the resume")
        assert app.link.model_label == SPEC and app.link.session_id == old_id
        assert f"on {SPEC} in {other.resolve()}" in notices(app)[-1]
        assert app.workspace == other.resolve() and app.link.workspace == other.resolve()
        assert app.checkpoints is not None and app.checkpoints.workspace == other.resolve()
        assert SPEC in app.query_one(StatusLine).full_text
        # The next turn runs on sonnet, in the other folder (a mention resolves there).
        await submit(pilot, "and @notes.md")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the turn")
        backend = app.link.router.backends[SPEC]
        texts = [b.text for b in backend.prompts[-1].messages[-1].content if b.type == "text"]
        assert texts[0].endswith('<file path="notes.md">\n# other\n</file>')


async def test_resume_keeps_the_current_model_when_the_recorded_one_cannot_be_used(make_app, ledger, tmp_path, clock):
    earlier = HarnessLink(SPEC, tmp_path / "demo-repo", ledger.path, router=ScriptedRouter({SPEC: [{"text": "x"}]}),
                          context=fixed_context, clock=clock, limits=AgentLimits(max_steps=5, show_budget=False))
    try:
        earlier.run_turn("hello", lambda m: None, threading.Event(), lambda t, a: True)
        old_id = earlier.session_id
    finally:
        earlier.close()
    app = make_app({HAIKU: [{"text": "still haiku"}]}, spec=HAIKU)  # no script: sonnet "cannot be used"
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, f"/resume {old_id}")
        await wait_until(pilot, lambda: any(f"resumed session {old_id}" in n for n in notices(app)), "the resume")
        assert app.link.model_label == HAIKU
        assert any(f"its model {SPEC} cannot be used now" in n for n in notices(app))
