"""Write the README screenshot of the TUI: the three-turn snapshot session, then /cost.

    .venv/bin/python tests/tui/tui_screenshot.py docs/tui-screenshot.svg

The model is the tests' scripted model (this is a picture of the interface, not of a model), run
through the real harness, projection, tools and ledger in a temporary folder.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

# A standalone script: its own folder (tui_helpers) is on the path; the shared helpers are one up.
sys.path.insert(0, str(Path(__file__).parent.parent))

from tui_helpers import SPEC, FrozenClock, fixed_context, submit  # noqa: E402
from scripted_model import ScriptedRouter  # noqa: E402
from tui_session_script import THREE_TURNS, run_three_turns  # noqa: E402

from hitrate.harness.agent import AgentLimits  # noqa: E402
from hitrate.tui.app import HitrateApp  # noqa: E402
from hitrate.tui.harness_link import HarnessLink  # noqa: E402
from hitrate.tui.prompt_input import PromptInput  # noqa: E402


async def shoot(target: Path, size: tuple[int, int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "demo-repo"
        workspace.mkdir()
        (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        clock = FrozenClock()
        link = HarnessLink(SPEC, workspace, Path(tmp) / "ledger.db", router=ScriptedRouter({SPEC: list(THREE_TURNS)}),
                           context=fixed_context, clock=clock, limits=AgentLimits(max_steps=10, show_budget=False))
        try:
            app = HitrateApp(link, approvals=False, clock=clock, tick_s=None, workspace=workspace)
            async with app.run_test(size=size) as pilot:
                app.query_one(PromptInput).cursor_blink = False
                await run_three_turns(pilot)
                await submit(pilot, "/cost")
                await pilot.pause(0.3)
                clock.advance(100)
                app.refresh_figures()
                await pilot.pause()
                target.parent.mkdir(parents=True, exist_ok=True)
                app.save_screenshot(filename=target.name, path=str(target.parent))
        finally:
            link.close()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/tui-screenshot.svg")
    asyncio.run(shoot(out, (132, 42)))
    print(out)
