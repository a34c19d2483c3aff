"""Splitting a streamed reply: forward text as it comes, hold back what may turn out to be a call."""

from __future__ import annotations

from typing import Iterable

from hitrate.engine.toolcalls.calls import ParsedReply
from hitrate.engine.toolcalls.json_calls import FENCE, CallOpening, at_line_start
from hitrate.engine.toolcalls.markup import MARKERS
from hitrate.engine.toolcalls.parse import parse_tool_calls

# Every string whose start a stream must wait on before forwarding: after a marker everything
# is held; at a fence the next few characters decide.
_WATCHED = MARKERS + (FENCE,)


class ToolCallStreamSplitter:
    """Forwards streamed text until a tool call may be starting, then holds the rest back.

    Held back, for as long as it takes to decide:
    - from a template marker (`<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`) to the end;
    - from a fence that opens a call to a declared tool (```` ```json\\n{"name": "read_file" ````)
      to the end; a fence that turns out to be something else (```` ```python ````, a JSON object
      naming no declared tool) is released as soon as that is clear, a few characters in;
    - the same for a `{` or `[` at the start of a line (a bare call);
    - a trailing fragment that may become one of those (`<tool_`, two backticks), and trailing
      whitespace (dropped if a call follows it, as the parsed content drops it).

    `finish` parses the whole reply with `parse_tool_calls`, so a stream ends with exactly the
    content and calls a non-streamed reply has: what was forwarded is always the start of that
    content, and `finish` returns the rest.
    """

    def __init__(self, tool_names: Iterable[str] | None = None) -> None:
        self._names = frozenset(tool_names) if tool_names is not None else None
        self._opening = CallOpening(self._names) if self._names else None
        self._text = ""  # the whole reply so far
        self._forwarded = 0  # characters of `_text` scanned and settled (forwarded or dropped)
        self._sent = ""  # what was forwarded
        self._holding = False  # a call started: hold everything from here to the end
        self._fences = 0  # fences forwarded so far: odd while inside a block that is not a call

    def feed(self, delta: str) -> str:
        """Returns the text that is safe to forward now (possibly empty)."""
        self._text += delta
        if self._holding:
            return ""
        text, pos = self._text, self._forwarded
        while True:
            at = self._next_candidate(text, pos)
            if at is None:
                return self._forward_until(self._settled_end(text))
            start, kind = at
            if kind == "marker":
                self._holding = True
                return self._forward_until(start)
            decision = self._decide(text, start, kind)
            if decision == "yes":
                self._holding = True
                return self._forward_until(start)
            if decision == "maybe":
                return self._forward_until(start)
            # Not a call: move past it. A fence that is not a call opens (or closes) a block.
            if kind == "fence":
                self._fences += 1
                pos = start + len(FENCE)
            else:
                pos = start + 1

    def finish(self) -> ParsedReply:
        """The parsed reply; its `content` is the part not yet forwarded by `feed`."""
        parsed = parse_tool_calls(self._text, self._names)
        if parsed.content.startswith(self._sent):
            parsed.content = parsed.content[len(self._sent) :]
        else:  # cannot happen if holding back is right; never repeat forwarded text
            parsed.content = ""
        return parsed

    # ------------------------------------------------------------------ scanning

    def _next_candidate(self, text: str, pos: int) -> tuple[int, str] | None:
        """The first place at or after `pos` where a call may start: (index, kind)."""
        found: list[tuple[int, str]] = []
        for marker in MARKERS:
            # From the first unsettled character: a fence or brace found not to open a call may
            # still begin a marker (`[` of `[TOOL_CALLS]`), and a marker sorts first.
            if (i := text.find(marker, self._forwarded)) >= 0:
                found.append((i, "marker"))
        if self._opening is not None:
            if (i := text.find(FENCE, pos)) >= 0:
                found.append((i, "fence"))
            for i in range(pos, len(text)):
                if text[i] in "{[" and at_line_start(text, i):
                    found.append((i, "bare"))
                    break
        return min(found, key=lambda f: (f[0], f[1] != "marker"), default=None)

    def _decide(self, text: str, start: int, kind: str) -> str:
        assert self._opening is not None
        if kind == "fence":
            if self._fences % 2:
                return "no"  # the closing fence of a block that is not a call
            return self._opening.fenced(text[start:])
        return self._opening.bare(text[start:])

    def _settled_end(self, text: str) -> int:
        """Where text stops being safe to forward when no call has started: before a trailing
        fragment of a watched string, and before trailing whitespace."""
        end = len(text)
        watched = _WATCHED if self._opening is not None else MARKERS
        for marker in watched:
            for n in range(min(len(marker) - 1, end - self._forwarded), 0, -1):
                if text.endswith(marker[:n]):
                    end = min(end, len(text) - n)
                    break
        return len(text[:end].rstrip())

    def _forward_until(self, end: int) -> str:
        """Forward `_text[_forwarded:end]`, with trailing whitespace held back (and leading
        whitespace of the reply dropped, as the parsed content drops it)."""
        end = max(self._forwarded, len(self._text[:end].rstrip()))
        piece = self._text[self._forwarded : end]
        if not self._sent:
            piece = piece.lstrip()
        self._forwarded = end
        self._sent += piece
        return piece
