"""Modal screens: approve a tool action (once, for the session, always, or deny with a reason),
confirm a model switch, and the help (over the conversation, never added to it)."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Markdown, Static

from hitrate.harness.permissions import Rule, prefix_rule
from hitrate.harness.terminal_text import visible, visible_value

from hitrate.tui.tool_panel import args_text, cut_lines


class HelpScreen(ModalScreen[None]):
    """The /help text over the conversation: read, scrolled with the arrows or PageUp / PageDown,
    and closed with Esc, q or F1; the transcript stays as it was."""

    BINDINGS = [Binding("escape,q,f1", "close", "Close")]

    def __init__(self, markdown: str) -> None:
        super().__init__(classes="dialog-screen -help")
        self._markdown = markdown

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static("Help · Esc closes", id="help-title")
            with VerticalScroll(id="help-body"):
                yield Markdown(self._markdown)

    def on_mount(self) -> None:
        self.query_one("#help-body", VerticalScroll).focus()

    @property
    def source(self) -> str:
        return self._markdown

    def action_close(self) -> None:
        self.dismiss(None)


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


#: How the dialog names the config file the "always" rules go to.
CONFIG_NAME = "config.toml"


class ApprovalAnswer(BaseModel):
    """The user's answer to an approval question."""

    model_config = ConfigDict(frozen=True)

    choice: Literal["once", "session", "always", "deny"]
    rule: Rule | None = None
    """The rule allowed for the session (or kept in the config file, for "always")."""
    reason: str = ""
    """Why the user denied it: sent back to the model in the tool result."""


def session_rule(tool: str, args: dict[str, Any]) -> Rule:
    """What "allow for this session" allows: commands with this prefix for the shell (every call
    when the command has no safe prefix is not offered), the tool itself for file writes and edits."""
    if tool == "shell":
        rule = prefix_rule(str(args.get("command", "")))
        if rule is not None:
            return rule
    return Rule(tool=tool)


class ApprovalScreen(ModalScreen[ApprovalAnswer]):
    """Allow once (y), for this session (a), always, kept in the config file (s), or deny (n), with
    a reason typed into the box that opens (Enter sends it; empty is a plain denial)."""

    BINDINGS = [
        Binding("y", "answer('once')", "Allow once"),
        Binding("a", "answer('session')", "Allow for the session"),
        Binding("s", "answer('always')", "Always allow (config file)"),
        Binding("n", "deny", "Deny"),
        Binding("escape", "deny_now", "Deny"),
    ]

    def __init__(self, tool: str, args: dict[str, Any], *, can_save: bool = True, offer_rules: bool = True) -> None:
        """`offer_rules` False: only once or deny (a command no sandbox confines)."""
        super().__init__(classes="dialog-screen -approval")
        self.tool = tool
        self.args = args
        self.rule = session_rule(tool, args)
        self.offer_rules = offer_rules
        self.can_save = can_save and offer_rules

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"Allow {visible(self.tool)}?"), id="dialog-title")
            # Shown with its control characters visible (a command hiding an escape sequence or a
            # bidi override reads as what it is); the rule is built from the real arguments.
            yield Static(approval_body(self.tool, visible_value(self.args)), id="dialog-body")  # type: ignore[arg-type]
            if self.offer_rules:
                always = f" · always (kept in {CONFIG_NAME}): s" if self.can_save else ""
                yield Static(Text(visible(f"for this session, {self.rule}: a{always} · deny with a reason: n")), id="dialog-rule")
            with Horizontal(id="dialog-buttons"):
                yield Button("Once (y)", id="once", variant="primary", compact=True)
                if self.offer_rules:
                    yield Button("Session (a)", id="session", compact=True)
                if self.can_save:
                    yield Button("Always (s)", id="always", compact=True)
                yield Button("Deny (n)", id="deny", variant="error", compact=True)
            yield Input(placeholder="why not? (the model reads it; Enter denies)", id="deny-reason")

    def on_mount(self) -> None:
        self.query_one("#deny-reason", Input).display = False
        self.query_one("#once", Button).focus()

    def _answer(self, choice: str, reason: str = "") -> None:
        rule = self.rule if choice in ("session", "always") else None
        self.dismiss(ApprovalAnswer(choice=choice, rule=rule, reason=reason))  # type: ignore[arg-type]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "deny":
            self.action_deny()
        else:
            self._answer(str(event.button.id))

    def action_answer(self, choice: str) -> None:
        if (choice == "always" and not self.can_save) or (choice == "session" and not self.offer_rules):
            return
        if not self._asking_reason:
            self._answer(choice)

    @property
    def _asking_reason(self) -> bool:
        return bool(self.query_one("#deny-reason", Input).display)

    def action_deny(self) -> None:
        box = self.query_one("#deny-reason", Input)
        box.display = True
        box.focus()

    def action_deny_now(self) -> None:
        box = self.query_one("#deny-reason", Input)
        self._answer("deny", box.value.strip() if box.display else "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._answer("deny", event.value.strip())
