"""Slash commands from Markdown files (project and user folders) and /init."""

from __future__ import annotations

import os
from pathlib import Path

from tui_helpers import SPEC, submit, wait_until

from hitrate.tui.commands import COMMANDS
from hitrate.tui.custom_commands import INIT_PROMPT, load_commands, user_folder
from hitrate.tui.dialogs import HelpScreen


def write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_project_commands_win_over_user_commands_and_builtins_over_both(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    user = tmp_path / "user"
    write(user, "review.md", "User review of $ARGUMENTS")
    write(user, "explain.md", "---\ndescription: Explain code simply\n---\nExplain this:")
    write(ws / ".hitrate" / "commands", "review.md", "Project review of $ARGUMENTS, twice: $ARGUMENTS")
    write(ws / ".hitrate" / "commands", "cost.md", "shadowed by the built-in")
    write(ws / ".hitrate" / "commands", "Bad Name.md", "not typeable")
    found = load_commands(ws, user, reserved=frozenset(COMMANDS))
    assert sorted(found) == ["explain", "review"]
    assert found["review"].prompt("calc.py") == "Project review of calc.py, twice: calc.py"
    assert found["explain"].description == "Explain code simply"
    assert found["explain"].prompt("x = 1") == "Explain this:\n\nx = 1"
    assert found["explain"].prompt("") == "Explain this:"
    assert found["review"].description == "Project review of $ARGUMENTS, twice: $ARGUMENTS"
    assert user_folder() == Path(os.environ["HITRATE_CONFIG"]).parent / "commands"


async def test_a_markdown_command_is_sent_as_a_prompt_and_listed_in_help(make_app, workspace):
    write(workspace / ".hitrate" / "commands", "review.md", "---\ndescription: Review a file\n---\nReview $ARGUMENTS for bugs.")
    write(user_folder(), "hello.md", "Say hello.")
    app = make_app({SPEC: [{"text": "Looks fine."}, {"text": "Hello!"}]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/help")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        help_text = app.screen.source
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help to close")
        assert "`/review [args]` — Review a file" in help_text and "`/hello [args]` — Say hello." in help_text
        await submit(pilot, "/review calc.py")
        await wait_until(pilot, lambda: not app.busy and app.figures.calls, "the turn")
        texts = [b.text for b in backend.prompts[-1].messages[-1].content if b.type == "text"]
        assert texts[0] == "Review calc.py for bugs."
        await submit(pilot, "/hello")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the second turn")
        await submit(pilot, "/nosuch")
        await pilot.pause()
        assert "unknown command /nosuch" in str(app.query("NoticeLine").last().render())
        assert "/review" in str(app.query("NoticeLine").last().render())


async def test_init_asks_the_agent_to_write_agents_md(make_app, workspace):
    app = make_app({SPEC: [
        {"tool_calls": [("write_file", '{"path": "AGENTS.md", "content": "# Agents\\n\\nRun pytest.\\n"}')]},
        {"text": "Wrote AGENTS.md."},
    ]})
    backend = app.link.router.backends[SPEC]
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/init")
        await wait_until(pilot, lambda: not app.busy and len(app.figures.calls) == 2, "the turn")
        assert [b.text for b in backend.prompts[0].messages[-1].content if b.type == "text"][0] == INIT_PROMPT
        assert (workspace / "AGENTS.md").read_text() == "# Agents\n\nRun pytest.\n"
