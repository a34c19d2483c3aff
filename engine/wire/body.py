"""Request bodies as the server accepts them: bounded in size, valid JSON, bounded in depth, text
that can be encoded.

Everything a client sends goes through `read_json` before any wire format looks at it, so that a
hostile body is refused with a 4xx in that wire's error shape instead of costing memory or
surfacing as a 500 from deep inside the tokenizer, the template or the JSON encoder:

- size: a body over the limit is refused from its `Content-Length` before a byte of it is read, and
  a chunked body as soon as what arrived passes the limit (never buffered whole);
- depth: Python's `json` recurses per nesting level and the chat template, pydantic and the grammar
  compiler recurse again on what it returns, so nesting is capped well below the interpreter's
  recursion limit;
- lone surrogates: JSON allows the escape `"\\ud800"`, Python decodes it to a string no UTF-8
  encoder accepts (the tokenizer, `json.dumps(...).encode()` and the response writer all fail on
  it), so it is refused with the path of the offending string.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from hitrate.engine.api import EngineError

# A local engine's context window is at most a few hundred thousand tokens, about a megabyte of
# text; a few megabytes leave room for JSON escaping, tool schemas and long histories. Anthropic
# documents 32 MB for its Messages API (`request_too_large`), sized for images and documents this
# server does not take.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_JSON_DEPTH = 64


class BodyTooLargeError(EngineError):
    """The request body is over the server's limit (HTTP 413)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        seen = f"{size} bytes" if size is not None else "more"
        super().__init__(f"request body too large: {seen}, but this server accepts at most {limit} bytes "
                         "(the limit is set with --max-body-mb)")
        self.limit = limit


class InvalidBodyError(EngineError):
    """The body is not JSON this server can take (HTTP 400)."""


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with `BodyTooLargeError` as soon as it is known to pass `limit`."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise InvalidBodyError(f"Content-Length is not a number: {declared!r}") from None
        if size > limit:
            raise BodyTooLargeError(limit, size)
    parts: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise BodyTooLargeError(limit)
        parts.append(chunk)
    return b"".join(parts)


def parse_json(raw: bytes) -> Any:
    """`raw` as JSON, with its nesting and its strings checked (see the module docstring)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise InvalidBodyError(f"request body is nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidBodyError(f"request body is not valid JSON: {exc}") from exc
    check_value(value)
    return value


def check_value(value: Any) -> None:
    """Depth and encodability of a decoded JSON value; iterative, so depth cannot exhaust the stack."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_JSON_DEPTH:
            raise InvalidBodyError(f"request body is nested too deeply (at most {MAX_JSON_DEPTH} levels)")
        if isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_text(key, path)
                stack.append((child, path + (key,)))
        elif isinstance(item, list):
            stack.extend((child, path + (i,)) for i, child in enumerate(item))


def _check_text(text: str, path: tuple[Any, ...]) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = ".".join(str(p) for p in path) or "body"
        raise InvalidBodyError(
            f"{where}: the string holds a lone UTF-16 surrogate (\\u{ord(text[exc.start]):04x} at "
            f"character {exc.start}), which is not valid Unicode text") from None
