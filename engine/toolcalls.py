"""Tool calls in generated text: parse them into structured calls, and split a stream around them.

Open-weight chat models write tool calls as markup inside their text. The formats handled here:

- Hermes / Qwen2.5 / Qwen3: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block
  per call; a final block whose closing tag never came (the model stopped at its end-of-turn
  token right after the JSON) is accepted too.
- Qwen3-Coder: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>`.
- Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` and the newer
  `[TOOL_CALLS]NAME[ARGS]{...}`.
- Llama 3.x: `<|python_tag|>{"name": ..., "parameters": {...}}`, or a reply that is nothing but
  such a JSON object (only recognised when the request declared tools and the name is one of them,
  so ordinary JSON answers are not mistaken for calls).

A call that cannot be parsed never raises: its raw text stays in the reply's content, preceded by
`INVALID_TOOL_CALL_MARKER`, so the caller (and the model on its next turn) can see what went wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

INVALID_TOOL_CALL_MARKER = "[unparsed tool call: {reason}]"

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_OPEN = "[TOOL_CALLS]"
LLAMA_PYTHON_TAG = "<|python_tag|>"
# Every marker after which a stream must stop forwarding text until the call is complete.
STREAM_MARKERS = (HERMES_OPEN, MISTRAL_OPEN, LLAMA_PYTHON_TAG)

_QWEN_CODER_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_QWEN_CODER_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One call. `arguments` is the decoded JSON object the model wrote; `id` is assigned by the
    server (models do not write ids) and echoed back by clients with the call's result."""

    name: str
    arguments: dict[str, Any]
    id: str = ""

    def arguments_json(self) -> str:
        """The arguments as a JSON string (OpenAI wire format): non-ASCII kept, key order kept."""
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class ParsedReply:
    """Generated text split into what is said (`content`) and what is called (`tool_calls`)."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # one reason per call that could not be parsed


class _Malformed(ValueError):
    pass


def _decode_arguments(raw: Any) -> dict[str, Any]:
    # Some models write `arguments` as a JSON-encoded string instead of an object.
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise _Malformed(f"arguments are not valid JSON ({exc.msg})") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _Malformed(f"arguments must be a JSON object, got {type(raw).__name__}")
    return raw


def _call_from_object(obj: Any, tool_names: frozenset[str] | None) -> ToolCall:
    if not isinstance(obj, dict):
        raise _Malformed(f"expected a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise _Malformed('missing "name"')
    if tool_names is not None and name not in tool_names:
        raise _Malformed(f"no tool named {name!r} was offered")
    args_key = "arguments" if "arguments" in obj else "parameters"
    return ToolCall(name=name, arguments=_decode_arguments(obj.get(args_key)))


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _parse_qwen_coder(body: str, tool_names: frozenset[str] | None) -> ToolCall:
    match = _QWEN_CODER_FUNCTION.search(body)
    if match is None:
        raise _Malformed("no <function=...> in XML tool call")
    name = match.group(1)
    if tool_names is not None and name not in tool_names:
        raise _Malformed(f"no tool named {name!r} was offered")
    arguments: dict[str, Any] = {}
    for key, value in _QWEN_CODER_PARAMETER.findall(match.group(2)):
        value = value.strip("\n")
        # Parameter values are raw text; numbers, booleans, objects and arrays arrive as JSON.
        try:
            decoded = json.loads(value)
            arguments[key] = value if isinstance(decoded, str) else decoded
        except json.JSONDecodeError:
            arguments[key] = value
    return ToolCall(name=name, arguments=arguments)


def _parse_hermes_body(body: str, tool_names: frozenset[str] | None) -> ToolCall:
    stripped = body.strip()
    if stripped.startswith("<function="):
        return _parse_qwen_coder(stripped, tool_names)
    return _call_from_object(_parse_json(stripped), tool_names)


def _invalid(reason: str, raw: str) -> str:
    return INVALID_TOOL_CALL_MARKER.format(reason=reason) + "\n" + raw


def _parse_hermes(text: str, tool_names: frozenset[str] | None) -> ParsedReply:
    pieces: list[str] = []
    calls: list[ToolCall] = []
    invalid: list[str] = []
    pos = 0
    while True:
        start = text.find(HERMES_OPEN, pos)
        if start < 0:
            pieces.append(text[pos:])
            break
        pieces.append(text[pos:start])
        body_start = start + len(HERMES_OPEN)
        end = text.find(HERMES_CLOSE, body_start)
        block_end = len(text) if end < 0 else end + len(HERMES_CLOSE)
        body = text[body_start : len(text) if end < 0 else end]
        try:
            calls.append(_parse_hermes_body(body, tool_names))
        except _Malformed as exc:
            reason = str(exc) if end >= 0 else f"{exc} (no closing {HERMES_CLOSE})"
            invalid.append(reason)
            pieces.append(_invalid(reason, text[start:block_end]))
        pos = block_end
    return ParsedReply(content="".join(pieces).strip(), tool_calls=calls, invalid=invalid)


def _parse_mistral(text: str, tool_names: frozenset[str] | None) -> ParsedReply:
    before, _, after = text.partition(MISTRAL_OPEN)
    calls: list[ToolCall] = []
    try:
        if "[ARGS]" in after:
            # Newer Mistral tokenizers: `[TOOL_CALLS]name[ARGS]{...}` repeated.
            for chunk in after.split(MISTRAL_OPEN):
                name, sep, args = chunk.partition("[ARGS]")
                if not sep:
                    raise _Malformed("missing [ARGS] after tool name")
                calls.append(_call_from_object({"name": name.strip(), "arguments": _parse_json(args)}, tool_names))
        else:
            decoded, end = json.JSONDecoder().raw_decode(after.lstrip())
            items = decoded if isinstance(decoded, list) else [decoded]
            calls.extend(_call_from_object(item, tool_names) for item in items)
            tail = after.lstrip()[end:]
            if tail.strip():
                before = before + tail
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        return ParsedReply(content=(before + _invalid(reason, MISTRAL_OPEN + after)).strip(), invalid=[reason])
    except _Malformed as exc:
        return ParsedReply(content=(before + _invalid(str(exc), MISTRAL_OPEN + after)).strip(), invalid=[str(exc)])
    return ParsedReply(content=before.strip(), tool_calls=calls)


def _parse_llama_json(text: str, tool_names: frozenset[str] | None, *, tagged: bool) -> ParsedReply | None:
    before, _, after = text.partition(LLAMA_PYTHON_TAG) if tagged else ("", "", text)
    calls: list[ToolCall] = []
    try:
        # Several calls may be separated by ';' (Llama 3.2's documented form) or newlines.
        for part in (p for p in re.split(r";\s*(?=\{)|\n(?=\{)", after.strip()) if p.strip()):
            calls.append(_call_from_object(_parse_json(part), tool_names))
    except _Malformed as exc:
        if not tagged:
            return None  # an untagged reply that is not a call is just an answer
        return ParsedReply(content=(before + _invalid(str(exc), LLAMA_PYTHON_TAG + after)).strip(), invalid=[str(exc)])
    return ParsedReply(content=before.strip(), tool_calls=calls)


def parse_tool_calls(text: str, tool_names: Iterable[str] | None = None) -> ParsedReply:
    """Split generated `text` into content and tool calls; never raises.

    `tool_names`: the tools the request offered. When given, a call to any other name is treated
    as unparsable (kept as marked text) rather than handed to a client that cannot run it.
    """
    names = frozenset(tool_names) if tool_names is not None else None
    if HERMES_OPEN in text:
        return _parse_hermes(text, names)
    if MISTRAL_OPEN in text:
        return _parse_mistral(text, names)
    if LLAMA_PYTHON_TAG in text:
        parsed = _parse_llama_json(text, names, tagged=True)
        assert parsed is not None
        return parsed
    if names and text.lstrip().startswith("{"):
        parsed = _parse_llama_json(text, names, tagged=False)
        if parsed is not None:
            return parsed
    return ParsedReply(content=text.strip())


class ToolCallStreamSplitter:
    """Forwards streamed text until a tool call may be starting, then holds the rest back.

    Text before any call is safe to show as it arrives; from the first marker on, the remainder
    is parsed whole when the stream ends (`finish`). A trailing fragment that could be the start
    of a marker (`<tool_` ...) is held until the next delta decides it.
    """

    def __init__(self, *, tools_offered: bool) -> None:
        self._tools_offered = tools_offered
        self._pending = ""  # text not yet forwarded
        self._holding = False  # a marker (or a bare JSON reply) started: hold everything now
        self._emitted_any = False

    def feed(self, delta: str) -> str:
        """Returns the part of `delta` (plus earlier pending text) that is safe to forward now."""
        if self._holding:
            self._pending += delta
            return ""
        text = self._pending + delta
        if not self._emitted_any and self._tools_offered:
            stripped = text.lstrip()
            if stripped.startswith("{"):
                # A reply that opens with JSON may be a Llama-style bare call: decide at the end.
                self._holding = True
                self._pending = text
                return ""
            if not stripped:
                self._pending = text
                return ""
        cut = min((i for i in (text.find(m) for m in STREAM_MARKERS) if i >= 0), default=-1)
        if cut >= 0:
            self._holding = True
            self._pending = text[cut:]
            return self._forward(text[:cut])
        keep = _longest_marker_prefix_suffix(text)
        self._pending = text[len(text) - keep :] if keep else ""
        return self._forward(text[: len(text) - keep])

    def _forward(self, text: str) -> str:
        if text:
            self._emitted_any = True
        return text

    def finish(self, tool_names: Iterable[str] | None = None) -> ParsedReply:
        """Parses what was held back. Its `content` is the text still to forward after `feed`'s."""
        held, self._pending = self._pending, ""
        if not self._holding:
            return ParsedReply(content=held)
        parsed = parse_tool_calls(held, tool_names)
        if not parsed.tool_calls and not parsed.invalid:
            parsed.content = held  # nothing was a call after all: forward it unchanged
        return parsed


def _longest_marker_prefix_suffix(text: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some stream marker."""
    best = 0
    for marker in STREAM_MARKERS:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:n]):
                best = n
                break
    return best
