"""The prompt box: a single-line Input with shell-like history on up / down."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class InputHistory:
    """Submitted lines, newest last, with a cursor that walks back and forth.

    Walking away from the line being typed keeps it as a draft, so down past the newest entry
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


class PromptInput(Input):
    """Where prompts and /commands are typed."""

    BINDINGS = [
        Binding("up", "history_previous", "Previous prompt", show=False),
        Binding("down", "history_next", "Next prompt", show=False),
    ]

    def __init__(self, history: InputHistory | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history = history or InputHistory()

    def _show(self, text: str | None) -> None:
        if text is not None:
            self.value = text
            self.cursor_position = len(text)

    def action_history_previous(self) -> None:
        self._show(self.history.previous(self.value))

    def action_history_next(self) -> None:
        self._show(self.history.next())
