"""The conversation view: user prompts, the model's streamed markdown, tool panels, notices."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from hitrate.tui.tool_panel import ToolPanel


class UserPrompt(Static):
    """What the user typed."""


class AssistantText(Markdown):
    """One stretch of model text between tool calls, filled through a MarkdownStream."""


class NoticeLine(Static):
    """A line from hitrate itself: epochs, cancellations, command output."""


class Conversation(VerticalScroll, can_focus=False):
    """Anchored to the bottom: follows the newest content until the user scrolls up to read,
    and follows again once they scroll back down (Textual's anchor)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._text: AssistantText | None = None
        self._stream: MarkdownStream | None = None
        self._tools: dict[str, ToolPanel] = {}

    def on_mount(self) -> None:
        self.anchor()

    def follow(self) -> None:
        """Follow the newest output again (after the user scrolled up, a new prompt brings the
        view back down, as it does in a terminal)."""
        self.anchor()

    async def _add(self, widget: Widget) -> None:
        await self.mount(widget)

    async def add_user(self, text: str) -> None:
        await self.end_text()
        await self._add(UserPrompt(Text(text), classes="user"))

    async def add_notice(self, text: str, kind: str = "info") -> None:
        await self.end_text()
        await self._add(NoticeLine(Text(text), classes=f"notice -{kind}"))

    async def add_markdown(self, markdown: str, kind: str = "info") -> None:
        """Command output that reads best as markdown (/help, /cost)."""
        await self.end_text()
        await self._add(Markdown(markdown, classes=f"notice-md -{kind}"))

    async def stream_text(self, fragment: str) -> None:
        """Append model text, creating the markdown block on the first fragment."""
        if self._stream is None:
            self._text = AssistantText(classes="assistant")
            await self._add(self._text)
            self._stream = Markdown.get_stream(self._text)
        await self._stream.write(fragment)

    async def end_text(self) -> None:
        """Close the current markdown block (the next text starts a new one below)."""
        if self._stream is not None:
            stream, self._stream, self._text = self._stream, None, None
            await stream.stop()

    async def void_text(self) -> None:
        """Mark the text being streamed as void (its attempt failed and is retried)."""
        if self._text is not None:
            self._text.add_class("-void")
        await self.end_text()

    async def add_tool(self, call_id: str, name: str, args: dict[str, Any]) -> ToolPanel:
        await self.end_text()
        panel = ToolPanel(call_id, name, args)
        self._tools[call_id] = panel
        await self._add(panel)
        return panel

    def finish_tool(self, call_id: str, content: str, is_error: bool, metadata: dict[str, Any]) -> None:
        panel = self._tools.get(call_id)
        if panel is not None:
            panel.finish(content, is_error, metadata)

    def newest_tool(self) -> ToolPanel | None:
        """The tool panel added last (None before any tool ran)."""
        return next(reversed(self._tools.values()), None)

    def cancel_running_tools(self) -> None:
        for panel in self._tools.values():
            if panel.state == "running":
                panel.cancel()

    @property
    def text_so_far(self) -> str:
        """The markdown source of the block being streamed ('' when none)."""
        return self._text.source if self._text is not None else ""

    async def clear(self) -> None:
        await self.end_text()
        self._tools.clear()
        await self.remove_children()
