"""A parsed tool call, a parsed reply, and turning one decoded JSON object into a call."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

INVALID_TOOL_CALL_MARKER = "[unparsed tool call: {reason}]"


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


class Malformed(ValueError):
    """A call that cannot be handed out; the message says why (shown to the client)."""


def decode_arguments(raw: Any) -> dict[str, Any]:
    # Some models write `arguments` as a JSON-encoded string instead of an object.
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise Malformed(f"arguments are not valid JSON ({exc.msg})") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise Malformed(f"arguments must be a JSON object, got {type(raw).__name__}")
    return raw


def call_from_object(obj: Any, tool_names: frozenset[str] | None) -> ToolCall:
    """A call from `{"name": ..., "arguments" | "parameters": ...}`; `tool_names` (when given) are
    the only names accepted."""
    if not isinstance(obj, dict):
        raise Malformed(f"expected a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise Malformed('missing "name"')
    if tool_names is not None and name not in tool_names:
        raise Malformed(f"no tool named {name!r} was offered")
    args_key = "arguments" if "arguments" in obj else "parameters"
    return ToolCall(name=name, arguments=decode_arguments(obj.get(args_key)))


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def invalid_text(reason: str, raw: str) -> str:
    """`raw` as it stays in the reply's content: preceded by the marker naming what was wrong."""
    return INVALID_TOOL_CALL_MARKER.format(reason=reason) + "\n" + raw
