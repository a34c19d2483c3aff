"""Event sinks for the terminal: a human-readable stream and one JSON object per line (`--json`)."""

from __future__ import annotations

import sys
from typing import TextIO

from pydantic import BaseModel

from hitrate.harness.events import (
    AssistantTurn,
    CallRecorded,
    CallRetrying,
    EpochStarted,
    Finished,
    HarnessTurn,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from hitrate.harness.commands.format import colour_wanted
from hitrate.harness.summary import SessionSummary, count_text, money, summary_lines
from hitrate.harness.terminal_text import VisibleStream, json_escaped, visible

# SGR codes (ECMA-48), used only when colour_wanted() says the stream is a terminal without NO_COLOR.
_STYLES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

ERROR_LINES = 8
"""Lines of a failed tool call's result shown: the model's error text is what the user needs."""


def call_line(event: CallRecorded) -> str:
    """`[call 3] read 1,024 · write 64 · fresh 12 · out 40 · $0.0010 · 0.52s · miss: ...`"""
    if event.error is not None:
        return f"[call {event.step}] FAILED: {event.error}"
    u = event.usage
    parts = [
        f"read {count_text(u.cache_read)}",
        f"write {count_text(u.cache_write_total)}",
        f"fresh {count_text(u.fresh_input)}",
        f"out {count_text(u.output)}",
        money(event.cost_usd),
    ]
    if event.latency_s is not None:
        parts.append(f"{event.latency_s:.2f}s")
    parts.append(f"miss: {event.miss_reason}" if event.miss_reason else "hit")
    return f"[call {event.step}] " + " · ".join(parts)


def _short(text: str, limit: int = 160) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    lines = text.count("\n") + 1 if text else 0
    return first + (f"  (+{lines - 1} lines)" if lines > 1 else "")


def _error_text(text: str, limit: int = 160) -> list[str]:
    """A failed tool call's result: its first ERROR_LINES lines, each cut at `limit` characters."""
    lines = [line[: limit - 1] + "…" if len(line) > limit else line for line in text.strip().splitlines()] or [""]
    if len(lines) > ERROR_LINES:
        lines = lines[:ERROR_LINES] + [f"(+{len(lines) - ERROR_LINES} lines)"]
    return lines


class TerminalPrinter:
    """Streams the model's text and tool activity; prints one line per recorded call and the summary.

    Everything it writes passes through `terminal_text.visible`: model text, tool arguments and
    output, error messages from servers all may carry terminal control sequences."""

    def __init__(self, out: TextIO | None = None, *, show_text: bool = True, colour: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.show_text = show_text
        self.colour = colour_wanted(self.out) if colour is None else colour
        self._mid_line = False
        self._stream = VisibleStream()

    def _paint(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        return f"\x1b[{';'.join(_STYLES[s] for s in styles)}m{text}\x1b[0m"

    def _line(self, text: str, *styles: str) -> None:
        held = self._stream.flush()
        if held:
            self.out.write(held)
            self._mid_line = True
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        self.out.write(self._paint(visible(text), *styles) + "\n")
        self.out.flush()

    def __call__(self, event: BaseModel) -> None:
        if isinstance(event, SessionStarted):
            self._line(f"hitrate · {event.model} · workspace {event.workspace}", "bold")
        elif isinstance(event, TextDelta):
            if self.show_text:
                shown = self._stream.feed(event.text)
                self.out.write(shown)
                self.out.flush()
                if shown:
                    self._mid_line = not shown.endswith("\n")
        elif isinstance(event, AssistantTurn):
            # A replayed turn was not streamed: show its text so the conversation can be followed.
            if event.replayed and event.text:
                self._line(f"assistant (replayed): {event.text}")
        elif isinstance(event, ToolCallStarted):
            self._line(f"→ {event.name} {_short(event.arguments, 120)}", "cyan")
        elif isinstance(event, ToolCallFinished):
            if event.is_error:
                # The error text is what the model reads next; the user should see it too.
                first, *rest = _error_text(event.content)
                self._line(f"  ✗ {first}", "red")
                for line in rest:
                    self._line(f"    {line}", "red")
            else:
                self._line(f"  ✓ {_short(event.content)}", "dim")
        elif isinstance(event, CallRetrying):
            self._line(f"[call {event.step}] attempt {event.attempt} failed ({event.error}); retrying in {event.delay_s:.1f}s",
                       "yellow")
        elif isinstance(event, CallRecorded):
            self._line(call_line(event), "red" if event.error is not None else "dim")
        elif isinstance(event, HarnessTurn):
            # The model is told something it did not ask for: the user sees what and why.
            self._line(f"[{event.kind.replace('_', ' ')}] {event.reason}: {_short(event.text, 200)}", "yellow")
        elif isinstance(event, EpochStarted) and event.number > 0:
            self._line(f"[epoch {event.number}] {event.reason}", "yellow")
        elif isinstance(event, Finished):
            self._line("")
            lines = summary_lines(SessionSummary.model_validate(event.summary))
            self._line(lines[0], "bold")
            if event.detail and event.status != "end_turn":
                # The same detail the JSON's `finished` event carries: which limit, or what failed.
                self._line(f"stopped: {event.detail}", "red" if event.status == "error" else "yellow")
            elif event.detail:
                self._line(f"ended: {event.detail}", "dim")
            if event.harness_turns:
                added = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(event.harness_turns.items()))
                self._line(f"harness turns: {added}", "yellow")
            for line in lines[1:]:
                self._line(line)


class JsonLinesPrinter:
    """One JSON object per event and line, flushed at once (for pipes and other programs)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: BaseModel) -> None:
        # Model text is in these lines: C1 and bidi controls are escaped like JSON escapes C0.
        self.out.write(json_escaped(event.model_dump_json()) + "\n")
        self.out.flush()
