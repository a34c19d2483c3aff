"""One collapsible panel per tool call: its arguments, then its result, error or diff; folded, a
preview of the output's last lines, and a command's exit code in the title."""

from __future__ import annotations

import json
import re
from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Collapsible, Static

#: Result text beyond this many lines is cut in the panel (the model got all of it).
RESULT_MAX_LINES = 40
#: Arguments whose value is shown inline in the title, by tool.
_TITLE_ARG = {"shell": "command", "read_file": "path", "write_file": "path", "edit_file": "path",
              "list_dir": "path", "glob": "pattern", "grep": "pattern"}


def tool_title(name: str, args: dict[str, Any]) -> str:
    """"shell: pytest -q" — the tool and its most telling argument, on one short line."""
    key = _TITLE_ARG.get(name)
    value = args.get(key) if key else None
    if not isinstance(value, str) or not value:
        return name
    first = value.strip().splitlines()[0] if value.strip() else value
    if len(first) > 60:
        first = first[:57] + "…"
    return f"{name}: {first}"


def args_text(args: dict[str, Any]) -> str:
    """Arguments as readable text: multi-line strings shown as blocks, the rest as JSON."""
    lines: list[str] = []
    for key in sorted(args):
        value = args[key]
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{key}:")
            lines.extend(f"  {line}" for line in value.splitlines())
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines) if lines else "(no arguments)"


def _lines_note(value: str) -> str:
    count = len(value.splitlines())
    return f"({count} line{'' if count == 1 else 's'}, see the diff)"


def compact_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments with multi-line strings summarised, for panels whose diff shows the change."""
    return {
        key: _lines_note(value) if isinstance(value, str) and "\n" in value else value
        for key, value in args.items()
    }


def cut_lines(text: str, limit: int = RESULT_MAX_LINES) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    hidden = len(lines) - limit
    return "\n".join(lines[:limit] + [f"… {hidden} more lines"])


#: Lines of a finished tool's output shown under its title while the panel is folded.
PREVIEW_LINES = 3

#: The line the shell tool ends its output with (`tools.shell`): the title says it instead.
_EXIT_TRAILER = re.compile(r"\n?\[(exit code -?\d+|killed by signal [^\]]+)\]\s*$")


def exit_code_of(metadata: dict[str, Any]) -> int | None:
    """The exit code a command tool reported (`metadata["exit_code"]`), None for other tools."""
    code = metadata.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def preview_lines(content: str, limit: int = PREVIEW_LINES) -> list[str]:
    """The last `limit` non-blank lines of a tool's output, without the shell's exit trailer
    (the title shows the exit code): where a test run's verdict or an error usually is."""
    lines = [line for line in _EXIT_TRAILER.sub("", content).splitlines() if line.strip()]
    return lines[-limit:]


class ToolPanel(Collapsible):
    """A tool call: title with its state (and a command's exit code), a preview of the output's
    last lines while folded, the whole output when opened (Enter on the title, or Ctrl+O)."""

    def __init__(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        self.call_id = call_id
        self.args = args
        self.tool_name = name
        self.base_title = tool_title(name, args)
        super().__init__(
            Static(Text(args_text(args)), classes="tool-args"),
            title=f"⚙ {self.base_title} …",
            collapsed=False,
            classes="tool-panel -running",
        )
        self.state = "running"
        self.result = ""
        self.diff = ""
        self.exit_code: int | None = None
        self._preview = Static("", classes="tool-preview")

    def compose(self) -> ComposeResult:
        # Collapsible's own parts, with the preview between the title and the (folded) contents.
        yield self._title
        yield self._preview
        with self.Contents():
            yield from self._contents_list

    def finish(self, content: str, is_error: bool, metadata: dict[str, Any]) -> None:
        """Show the result. Errors and diffs stay open; the rest fold away, with a preview. A
        command that exits non-zero is a ✗ with its exit code (the model still got its output)."""
        self.exit_code = exit_code_of(metadata)
        failed = is_error or (self.exit_code is not None and self.exit_code != 0)
        self.state = "error" if failed else "done"
        self.remove_class("-running")
        self.add_class("-error" if failed else "-done")
        mark = "✗" if failed else "✓"
        if metadata.get("refused"):
            suffix = " (refused)"
        elif metadata.get("timed_out"):
            suffix = " (timed out)"
        elif metadata.get("cancelled"):
            suffix = " (cancelled)"
        elif self.exit_code is not None:
            suffix = f" · exit {self.exit_code}"
        else:
            suffix = ""
        self.title = f"{mark} {self.base_title}{suffix}"
        contents = self.query_one(Collapsible.Contents)
        diff = metadata.get("diff")
        self.result = content
        self.diff = diff if isinstance(diff, str) else ""
        if is_error:
            contents.mount(Static(Text(cut_lines(content)), classes="tool-error"))
        else:
            contents.mount(Static(Text(cut_lines(content)), classes="tool-result"))
        if isinstance(diff, str) and diff:
            self.query_one(".tool-args", Static).update(Text(args_text(compact_args(self.args))))
            contents.mount(Static(Syntax(cut_lines(diff, 200), "diff", theme="ansi_dark", word_wrap=True), classes="tool-diff"))
        preview = preview_lines(content)
        self._preview.update(Text("\n".join(preview), no_wrap=True, overflow="ellipsis"))
        self._preview.set_class(not preview, "-empty")
        self.collapsed = not (is_error or (isinstance(diff, str) and diff))

    def cancel(self) -> None:
        """The step was cancelled before the tool returned."""
        self.state = "cancelled"
        self.remove_class("-running")
        self.add_class("-error")
        self.title = f"✗ {self.base_title} (cancelled)"

    @property
    def preview_text(self) -> str:
        """The preview shown while folded ('' when open or without output)."""
        return "" if not self.collapsed or self._preview.has_class("-empty") else str(self._preview.render())
