"""Does a reply that carries no tool call look like one the model meant to make?

Small models often write their call as text: a JSON object naming a tool (bare, or in a
```` ```json ```` fence, with `arguments` or `parameters`), a `<tool_call>` block their server did not
parse, or a call of a function that is not a tool at all (the task's own `deep_merge(...)`). Taken at
face value such a reply ends the run as a "final answer" after one step. The agent answers it with a
repair turn instead (`harness.repair`).

This detector is the harness's own, independent of any server's parser: the harness also talks to
cloud models and to OpenAI-compatible servers (llama.cpp, vLLM) that parse calls their own way, or
not at all. It only reads text; it never turns text into a call (what the model wrote is sent back
byte for byte).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Iterator, Literal, Sequence

from pydantic import BaseModel, ConfigDict

ShapeKind = Literal["text_call", "unknown_function", "call_markup"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)
_MARKUP = re.compile(r"<\|?(tool_call|function_call|tool_calls)\|?>|\[TOOL_CALLS\]|<function=", re.IGNORECASE)
_LOOSE_CALL = re.compile(r'\{\s*"name"\s*:\s*"(?P<name>[^"\n]{1,100})"\s*,\s*"(?:arguments|parameters)"\s*:')
"""A call-like object that is not valid JSON: Python tuples in the arguments, a reply cut off at
the token limit (both seen from Qwen2.5-Coder-0.5B)."""
_MAX_OBJECTS = 200
"""JSON objects tried per reply at most: a long reply full of braces costs bounded time."""


class CallShape(BaseModel):
    """What in a reply looked like a call."""

    model_config = ConfigDict(frozen=True)

    kind: ShapeKind
    """text_call: a call of a tool written as text; unknown_function: a call of a name that is not a
    tool; call_markup: `<tool_call>`-style markup that was not read as a call."""
    name: str | None = None
    """The function it named, when it named one."""

    def describe(self) -> str:
        """A short phrase for the user and the model: what was found."""
        if self.kind == "text_call":
            return f"a call of `{self.name}` written as text"
        if self.kind == "unknown_function":
            return f"a call of `{self.name}`, which is not one of your tools"
        return "tool-call markup that could not be read as a call"


def call_shape(text: str, tool_names: Sequence[str]) -> CallShape | None:
    """The call-shaped part of `text` (a reply with no structured call), or None when it reads as
    an ordinary answer. A call of a tool wins over a call of something else."""
    if not text.strip():
        return None
    tools = set(tool_names)
    named = [*_json_call_names(text), *(m["name"] for m in _LOOSE_CALL.finditer(text)), *_expression_call_names(text)]
    for name in named:
        if name in tools:
            return CallShape(kind="text_call", name=name)
    if _MARKUP.search(text):
        return CallShape(kind="call_markup", name=named[0] if named else None)
    if named:
        return CallShape(kind="unknown_function", name=named[0])
    return None


def _json_call_names(text: str) -> Iterator[str]:
    """Names of the call-like JSON objects in `text`, bare or fenced, alone or in a list."""
    decoder = json.JSONDecoder()
    tried = 0
    position = 0
    while tried < _MAX_OBJECTS:
        start = _next_json_start(text, position)
        if start < 0:
            return
        tried += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        found = list(_names_in(value))
        yield from found
        position = end if found or isinstance(value, (dict, list)) else start + 1


def _next_json_start(text: str, position: int) -> int:
    candidates = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
    return min(candidates) if candidates else -1


def _names_in(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            yield from _names_in(item)
        return
    if not isinstance(value, dict):
        return
    function = value.get("function")
    if isinstance(function, dict):  # OpenAI's {"type": "function", "function": {...}}
        yield from _names_in(function)
        return
    name = value.get("name")
    if isinstance(name, str) and name and ("arguments" in value or "parameters" in value or "args" in value):
        yield name
        return
    for item in value.values():  # {"tool_calls": [{...}]} and the like
        if isinstance(item, (dict, list)):
            yield from _names_in(item)


def _expression_call_names(text: str) -> Iterator[str]:
    """The function name when the whole reply, or the whole of one fenced block, is a single call
    expression such as `deep_merge({"a": 1}, {"b": 2})` or `read_file(path="x.py")`. Code with
    anything else in it (a definition, an assignment, several statements) is an answer, not a call."""
    pieces = [body for _, body in _FENCE.findall(text)] or [text]
    for piece in pieces:
        name = _single_call(piece.strip())
        if name is not None:
            yield name


def _single_call(source: str) -> str | None:
    if not source or "\n\n" in source or len(source) > 4000:
        return None
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError):
        return None
    call = tree.body
    if isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute)):
        if isinstance(call.func, ast.Name):
            return call.func.id
        return call.func.attr
    return None
