"""Tool calls in the markup of a chat template: Hermes / Qwen `<tool_call>`, Qwen3-Coder's XML,
Mistral's `[TOOL_CALLS]` and Llama 3's `<|python_tag|>`.

Text inside such markup was meant as a call, so a call that cannot be parsed is reported
(`ParsedReply.invalid`) and kept in the content behind `INVALID_TOOL_CALL_MARKER`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hitrate.engine.toolcalls.calls import (
    Malformed,
    ParsedReply,
    ToolCall,
    call_from_object,
    invalid_text,
    parse_json,
)

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_OPEN = "[TOOL_CALLS]"
LLAMA_PYTHON_TAG = "<|python_tag|>"
MARKERS = (HERMES_OPEN, MISTRAL_OPEN, LLAMA_PYTHON_TAG)

_QWEN_CODER_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_QWEN_CODER_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)


def _parse_qwen_coder(body: str, tool_names: frozenset[str] | None) -> ToolCall:
    match = _QWEN_CODER_FUNCTION.search(body)
    if match is None:
        raise Malformed("no <function=...> in XML tool call")
    name = match.group(1)
    if tool_names is not None and name not in tool_names:
        raise Malformed(f"no tool named {name!r} was offered")
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
    return call_from_object(parse_json(stripped), tool_names)


def parse_hermes(text: str, tool_names: frozenset[str] | None) -> ParsedReply:
    """Every `<tool_call>...</tool_call>` block; a final block whose closing tag never came (the
    model stopped at its end-of-turn token right after the JSON) is accepted too."""
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
        except Malformed as exc:
            reason = str(exc) if end >= 0 else f"{exc} (no closing {HERMES_CLOSE})"
            invalid.append(reason)
            pieces.append(invalid_text(reason, text[start:block_end]))
        pos = block_end
    return ParsedReply(content="".join(pieces).strip(), tool_calls=calls, invalid=invalid)


def parse_mistral(text: str, tool_names: frozenset[str] | None) -> ParsedReply:
    """`[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` and the newer `[TOOL_CALLS]NAME[ARGS]{...}`."""
    before, _, after = text.partition(MISTRAL_OPEN)
    calls: list[ToolCall] = []
    try:
        if "[ARGS]" in after:
            for chunk in after.split(MISTRAL_OPEN):
                name, sep, args = chunk.partition("[ARGS]")
                if not sep:
                    raise Malformed("missing [ARGS] after tool name")
                calls.append(call_from_object({"name": name.strip(), "arguments": parse_json(args)}, tool_names))
        else:
            decoded, end = json.JSONDecoder().raw_decode(after.lstrip())
            items = decoded if isinstance(decoded, list) else [decoded]
            calls.extend(call_from_object(item, tool_names) for item in items)
            tail = after.lstrip()[end:]
            if tail.strip():
                before = before + tail
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        return ParsedReply(content=(before + invalid_text(reason, MISTRAL_OPEN + after)).strip(), invalid=[reason])
    except Malformed as exc:
        return ParsedReply(content=(before + invalid_text(str(exc), MISTRAL_OPEN + after)).strip(), invalid=[str(exc)])
    return ParsedReply(content=before.strip(), tool_calls=calls)


def parse_llama_tagged(text: str, tool_names: frozenset[str] | None) -> ParsedReply:
    """`<|python_tag|>{"name": ..., "parameters": {...}}`; several calls may be separated by ';'
    (Llama 3.2's documented form) or newlines."""
    before, _, after = text.partition(LLAMA_PYTHON_TAG)
    calls: list[ToolCall] = []
    try:
        for part in (p for p in re.split(r";\s*(?=\{)|\n(?=\{)", after.strip()) if p.strip()):
            calls.append(call_from_object(parse_json(part), tool_names))
    except Malformed as exc:
        return ParsedReply(content=(before + invalid_text(str(exc), LLAMA_PYTHON_TAG + after)).strip(),
                           invalid=[str(exc)])
    return ParsedReply(content=before.strip(), tool_calls=calls)
