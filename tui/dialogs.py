"""Modal questions: approve a tool action, confirm a model switch."""

from __future__ import annotations

import difflib
from typing import Any

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from hitrate.tui.tool_panel import args_text, cut_lines


class ConfirmScreen(ModalScreen[bool]):
    """A yes / no question. y / enter answers yes, n / esc answers no."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, body: RenderableType, yes: str = "Yes", no: str = "No", *, kind: str = "confirm") -> None:
        super().__init__(classes=f"dialog-screen -{kind}")
        self._title = title
        self._body = body
        self._yes = yes
        self._no = no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self._title, id="dialog-title")
            yield Static(self._body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self._yes} (y)", id="yes", variant="primary")
                yield Button(f"{self._no} (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


def _lines(text: str) -> list[str]:
    # difflib glues a last line without a newline to the next diff line; an edit's strings
    # usually end mid-file, so give every line its newline.
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]


def approval_body(tool: str, args: dict[str, Any]) -> RenderableType:
    """What the action will do: the command line, the new file, or the edit as a diff."""
    if tool == "shell" and isinstance(args.get("command"), str):
        return Syntax(args["command"], "bash", theme="ansi_dark", word_wrap=True)
    if tool == "edit_file" and isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
        path = str(args.get("path", "?"))
        diff = "".join(
            difflib.unified_diff(
                _lines(args["old_string"]), _lines(args["new_string"]), fromfile=f"a/{path}", tofile=f"b/{path}"
            )
        )
        return Syntax(cut_lines(diff, 30), "diff", theme="ansi_dark", word_wrap=True)
    if tool == "write_file" and isinstance(args.get("content"), str):
        head = f"{args.get('path', '?')} ({len(args['content'].encode('utf-8')):,} bytes)\n"
        return Text(head + cut_lines(args["content"], 20))
    return Text(args_text(args))


def approval_screen(tool: str, args: dict[str, Any]) -> ConfirmScreen:
    return ConfirmScreen(f"Allow {tool}?", approval_body(tool, args), yes="Allow", no="Deny", kind="approval")
