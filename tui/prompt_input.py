"""The prompt box: a multi-line editor with shell-like history and an external editor.

Enter sends; Tab completes an `@path` mention; Ctrl+J (and Shift+Enter where the terminal reports it) starts a new line. Terminals
send Enter as CR and Ctrl+J as LF, which Textual reports as different keys; Shift+Enter is only
distinguishable on terminals speaking the kitty keyboard protocol, so Ctrl+J is the one that works
everywhere. A paste is inserted whole, newlines included (Textual's bracketed paste). Up / down walk
the history only from the first / last line, so they still move the cursor inside a long prompt.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from textual import events
from textual.app import SuspendNotSupported
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from hitrate.harness.terminal_text import visible
from hitrate.tui.mentions import complete


class InputHistory:
    """Submitted prompts, newest last, with a cursor that walks back and forth.

    Walking away from the prompt being typed keeps it as a draft, so down past the newest entry
    gives it back instead of losing it. Repeating the previous entry adds nothing.
    """

    def __init__(self, entries: list[str] | None = None, limit: int = 500) -> None:
        self.entries: list[str] = list(entries or [])[-limit:]
        self.limit = limit
        self._cursor: int | None = None
        self._draft = ""

    def add(self, line: str) -> None:
        if line.strip() and (not self.entries or self.entries[-1] != line):
            self.entries.append(line)
            del self.entries[: -self.limit]
        self._cursor = None
        self._draft = ""

    def previous(self, current: str) -> str | None:
        """The entry before the cursor, or None when there is none (the box keeps its text)."""
        if not self.entries:
            return None
        if self._cursor is None:
            self._draft = current
            self._cursor = len(self.entries) - 1
        elif self._cursor > 0:
            self._cursor -= 1
        else:
            return None
        return self.entries[self._cursor]

    def next(self) -> str | None:
        """The entry after the cursor, the draft past the newest one, None when not walking."""
        if self._cursor is None:
            return None
        if self._cursor < len(self.entries) - 1:
            self._cursor += 1
            return self.entries[self._cursor]
        self._cursor = None
        return self._draft


class EditorError(RuntimeError):
    """The external editor could not be run; the message says why and what to set."""


def editor_command(env: dict[str, str] | None = None) -> list[str]:
    """$VISUAL, else $EDITOR, split like a shell would ("code --wait" is two words)."""
    env = dict(os.environ) if env is None else env
    line = env.get("VISUAL") or env.get("EDITOR")
    if not line or not line.strip():
        raise EditorError("no external editor: set $VISUAL or $EDITOR (e.g. EDITOR=vim)")
    return shlex.split(line)


def edit_externally(text: str, command: list[str]) -> str:
    """Open `text` in the editor, wait for it to exit, and return the file it left."""
    with tempfile.TemporaryDirectory(prefix="hitrate-prompt-") as tmp:
        path = Path(tmp) / "prompt.md"
        path.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run([*command, str(path)], check=False)
        except OSError as exc:
            raise EditorError(f"could not run {command[0]!r}: {exc.strerror or exc}") from exc
        if done.returncode != 0:
            raise EditorError(f"{shlex.join(command)} exited with status {done.returncode}; the prompt is unchanged")
        edited = path.read_text(encoding="utf-8")
    # Editors end the file with a newline the user did not mean as part of the prompt.
    return edited[:-1] if edited.endswith("\n") and not text.endswith("\n") else edited


class PromptInput(TextArea):
    """Where prompts and /commands are typed."""

    BINDINGS = [
        Binding("ctrl+j,shift+enter", "newline", "New line", show=False),
        Binding("ctrl+g", "external_editor", "Editor"),
        # Tab completes an @path mention; it never takes the focus away (typed text would then
        # go nowhere, and the conversation would jump to the focused widget).
        Binding("tab", "complete", "Complete @path", show=False),
    ]

    class Submitted(Message):
        """Enter was pressed: `value` is the whole prompt, every line of it."""

        def __init__(self, prompt_input: "PromptInput", value: str) -> None:
            super().__init__()
            self.prompt_input = prompt_input
            self.value = value

        @property
        def control(self) -> "PromptInput":
            return self.prompt_input

    class EditorFailed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, history: InputHistory | None = None, *, placeholder: str = "", workspace: Path | None = None,
                 **kwargs: object) -> None:
        super().__init__(placeholder=placeholder, soft_wrap=True, show_line_numbers=False, compact=True,
                         highlight_cursor_line=False, **kwargs)  # type: ignore[arg-type]
        self.prompt_history = history or InputHistory()
        """Earlier prompts (`history` is TextArea's own undo history)."""
        self.workspace = workspace
        """Where @path mentions are completed from (None: no completion)."""

    # ---- the text as one value (what the app reads and the tests set) ----------------------

    @property
    def value(self) -> str:
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def insert_at_cursor(self, text: str) -> None:
        self.replace(text, *self.selection)

    # ---- keys ----------------------------------------------------------------------------

    #: Keys acted on as they arrive, like typed characters. A binding runs only once its key event
    #: has bubbled up to the app, by which time the characters typed after it (a fast typist, a
    #: burst of type-ahead) are already in: "one", Ctrl+J, "two" would read "onetwo\n".
    _IN_ORDER_KEYS = {"ctrl+j": "action_newline", "shift+enter": "action_newline", "tab": "action_complete"}

    async def _on_key(self, event: events.Key) -> None:
        # TextArea inserts a newline on Enter before any binding is consulted: take Enter first.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text
            if text.strip():
                # Emptied now, not when the app reads the message: what is typed next (type-ahead)
                # is the next prompt, and must not be wiped with this one.
                self.value = ""
            self.post_message(self.Submitted(self, text))
            return
        action = self._IN_ORDER_KEYS.get(event.key)
        if action is not None:
            event.stop()
            event.prevent_default()
            getattr(self, action)()
            return
        if event.key == "up" and self.cursor_location[0] == 0:
            event.stop()
            event.prevent_default()
            self._show(self.prompt_history.previous(self.text))
            return
        if event.key == "down" and self.cursor_location[0] == self.document.line_count - 1:
            event.stop()
            event.prevent_default()
            self._show(self.prompt_history.next())
            return
        await super()._on_key(event)

    def _show(self, text: str | None) -> None:
        if text is not None:
            self.value = text

    def action_history_previous(self) -> None:
        self._show(self.prompt_history.previous(self.text))

    def action_history_next(self) -> None:
        self._show(self.prompt_history.next())

    def action_complete(self) -> None:
        """Complete the @path mention before the cursor; several matches are listed."""
        if self.workspace is None:
            return
        row, column = self.cursor_location
        line = self.document.get_line(row)
        start = column
        while start > 0 and not line[start - 1].isspace():
            start -= 1
        word = line[start:column]
        if not word.startswith("@"):
            return
        completion, candidates = complete(self.workspace, word[1:])
        if not candidates:
            self.notify(visible(f"no file in the workspace matches {word}"), severity="warning", markup=False)
            return
        unique_file = len(candidates) == 1 and not candidates[0].endswith("/")
        new = "@" + completion + (" " if unique_file else "")
        if new != word:
            self.replace(new, (row, start), (row, column))
        if len(candidates) > 1:
            more = f" … and {len(candidates) - 12} more" if len(candidates) > 12 else ""
            # File names are the model's to choose: shown as typed.
            self.notify(visible("  ".join(candidates[:12]) + more), title="@ matches", markup=False)

    def action_newline(self) -> None:
        self.insert_at_cursor("\n")

    def action_external_editor(self) -> None:
        """Edit the prompt in $VISUAL / $EDITOR with the app suspended (the terminal is the editor's)."""
        try:
            command = editor_command()
            try:
                with self.app.suspend():
                    edited = edit_externally(self.text, command)
            except SuspendNotSupported:
                # No terminal to hand over (headless tests, textual-web): run the editor anyway.
                edited = edit_externally(self.text, command)
        except EditorError as exc:
            self.post_message(self.EditorFailed(str(exc)))
            return
        self.value = edited
        self.focus()
