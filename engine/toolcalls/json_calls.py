"""Tool calls written as plain JSON, without the chat template's markup.

Small models often answer a tool prompt with the call's JSON as ordinary text: Qwen2.5-Coder
writes a sentence and then a ```` ```json ```` fence, Llama 3 writes the bare object. Such text is
taken as a call only when every object in it names a tool the request declared and carries the
call's arguments:

- a call object is `{"name": <declared tool>, "arguments" | "parameters": <object, or a JSON
  string of one>}`, optionally with `"type": "function"` (Llama 3.2); any other key makes it an
  ordinary JSON answer;
- fenced: a block opened by ```` ``` ```` or ```` ```json ```` whose body is one call object, a JSON
  array of them, or several one after another (`;`, `,` or whitespace between), closed by
  ```` ``` ```` or by the end of the reply. Prose before, between and after fenced calls is kept
  as the reply's content; fences in another language (```` ```python ````) are never calls;
- bare: call objects (or an array of them) starting at the beginning of a line, and JSON only from
  there to the end of the reply. Prose before them is kept; JSON after the first call that is no
  call (the tool result small models go on to imagine, a call to an undeclared function) stays
  content, and so does an object cut short by the token limit; prose after them makes the whole
  reply text (an object in the middle of an explanation is an example, not a call).

Unlike markup, plain JSON is not certainly meant as a call: JSON that does not parse, or names a
function nobody declared (a model "calling" the very function its task asks it to write), leaves
the reply as it is, with nothing marked invalid.

`CallOpening` decides, from a stream's first few characters at a fence or a line-start brace,
whether a call may be starting there, so a stream holds back only text that may become a call.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import regex

from hitrate.engine.toolcalls.calls import Malformed, ToolCall, call_from_object

FENCE = "```"
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type"})
_FENCE_LANGUAGE = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n")
_SEPARATORS = " \t\r\n;,"


def call_or_none(obj: Any, tool_names: frozenset[str]) -> ToolCall | None:
    """`obj` as a call to a declared tool, or None when it is any other JSON."""
    if not isinstance(obj, dict) or not obj.keys() <= _CALL_KEYS:
        return None
    name = obj.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    if ("arguments" in obj) == ("parameters" in obj) or obj.get("type", "function") != "function":
        return None
    try:
        return call_from_object(obj, tool_names)
    except Malformed:  # arguments that are not an object: not a call we can hand out
        return None


def _skip(text: str, pos: int, chars: str = " \t\r\n") -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _fence_body_calls(text: str, start: int, tool_names: frozenset[str]) -> tuple[list[ToolCall], int] | None:
    """The calls in a fence's body from `start` and where the block ends (past its closing fence,
    or the end of `text`), or None unless the body is call objects to declared tools only."""
    decoder = json.JSONDecoder()
    objects: list[Any] = []
    pos = _skip(text, start)
    while pos < len(text):
        if text.startswith(FENCE, pos):
            pos += len(FENCE)
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        objects.extend(value if isinstance(value, list) else [value])
        pos = _skip(text, pos, _SEPARATORS)
    calls = [call_or_none(obj, tool_names) for obj in objects]
    if not calls or any(call is None for call in calls):
        return None
    return calls, pos  # type: ignore[return-value]


def fenced_calls(text: str, tool_names: frozenset[str]) -> tuple[list[tuple[int, int]], list[ToolCall]]:
    """Every fenced block that is a call: their (start, end) spans and the calls, in order.

    Fences are paired as they come: a fence that opens a block which is not a call makes the next
    fence its closing one, so the end of a ```` ```python ```` block never opens a block."""
    spans: list[tuple[int, int]] = []
    calls: list[ToolCall] = []
    pos = 0
    while (start := text.find(FENCE, pos)) >= 0:
        language = _FENCE_LANGUAGE.match(text, start + len(FENCE))
        if language is not None and language.group(1).lower() in ("", "json"):
            found = _fence_body_calls(text, language.end(), tool_names)
            if found is not None:
                spans.append((start, found[1]))
                calls.extend(found[0])
                pos = found[1]
                continue
        close = text.find(FENCE, start + len(FENCE))
        pos = len(text) if close < 0 else close + len(FENCE)
    return spans, calls


def at_line_start(text: str, i: int) -> bool:
    """Whether `text[i]` begins a line: only blanks between it and the last newline or the start."""
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] == "\n"


def bare_calls(text: str, tool_names: frozenset[str]) -> tuple[int, list[ToolCall], list[str]] | None:
    """Bare calls: where they begin, the calls, and the JSON written among them that is no call.

    A run of JSON values from a line-start `{` or `[` to the end of `text` whose first value is a
    call to a declared tool. Every call in the run is taken; any other value in it (the tool's
    result the model went on to imagine, a call to a function nobody declared) stays content, as
    does a last value cut short by the token limit. Prose after the run makes it no call."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text):
        start = match.start()
        if not at_line_start(text, start):
            continue
        calls: list[ToolCall] = []
        others: list[str] = []
        pos = start
        while pos < len(text):
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                if calls and text[pos] in "{[":
                    others.append(text[pos:])  # unfinished: the reply ran out of tokens
                    pos = len(text)
                break
            found = [call_or_none(v, tool_names) for v in (value if isinstance(value, list) else [value])]
            if not calls and (not found or found[0] is None):
                break  # the run must open with a call
            if all(c is not None for c in found):
                calls.extend(found)  # type: ignore[arg-type]
            else:
                others.append(text[pos:end])
            pos = _skip(text, end, _SEPARATORS)
        if calls and pos >= len(text):
            return start, calls, others
    return None


Opening = Literal["yes", "maybe", "no"]


class CallOpening:
    """Whether text beginning at a fence or at a line-start brace opens a call to one of the
    declared tools: "yes", "no", or "maybe" (too short to tell). A call's object must start with
    its name, arguments or `"type": "function"`, which every model observed does."""

    def __init__(self, tool_names: frozenset[str]) -> None:
        names = "|".join(regex.escape(json.dumps(n, ensure_ascii=False)) for n in sorted(tool_names))
        obj = (r'(?:\[\s*)?\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?'
               rf'(?:"name"\s*:\s*(?:{names})|"(?:arguments|parameters)"\s*:)')
        self._fenced = regex.compile(r"```[ \t]*(?i:json)?[ \t]*\r?\n\s*" + obj)
        self._bare = regex.compile(obj)

    def fenced(self, text: str) -> Opening:
        return self._decide(self._fenced, text)

    def bare(self, text: str) -> Opening:
        return self._decide(self._bare, text)

    @staticmethod
    def _decide(pattern: regex.Pattern, text: str) -> Opening:
        match = pattern.match(text, partial=True)
        if match is None:
            return "no"
        return "maybe" if match.partial else "yes"
