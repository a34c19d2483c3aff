"""Server-sent event streams in each API's own shape, from `ChatService.stream` items
(text deltas, then the `Reply`; the server takes the leading `PrefillStarted` out and passes it
on separately).

OpenAI: `data: {chat.completion.chunk}` lines - a role chunk, content deltas, tool calls (each
whole, in one delta), a chunk with `finish_reason`, then (with `stream_options.include_usage`) a
chunk with empty `choices` and the usage, then `data: [DONE]`.

Anthropic: `message_start` (with the usage split already exact, as Anthropic sends it),
`content_block_start` / `content_block_delta` / `content_block_stop`
per block (text first, then one `tool_use` block per call with its input as one
`input_json_delta`), `message_delta` (stop reason and usage), `message_stop`.

An engine failure after the stream has started is sent as each API's in-stream error event.
"""

from __future__ import annotations

import json
import logging
from typing import Any, AsyncIterator, Callable

from hitrate.engine import wire_anthropic, wire_openai
from hitrate.engine.api import EngineError, PrefillStarted
from hitrate.engine.serving import PreparedCall, Reply

log = logging.getLogger(__name__)


def _data(payload: dict[str, Any]) -> str:
    return "data: " + json.dumps(payload, ensure_ascii=False) + "\n\n"


def _event(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\ndata: " + json.dumps(payload, ensure_ascii=False) + "\n\n"


def _error_message(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, EngineError):
        return "invalid_request_error", str(exc)
    log.error("engine failed during a stream", exc_info=exc)
    return "api_error", f"internal error: {type(exc).__name__}: {exc}"


async def openai_events(
    ids: wire_openai.CompletionIds,
    items: AsyncIterator[str | Reply],
    include_usage: bool,
    *,
    on_reply: Callable[[Reply], None],
    on_error: Callable[[], None],
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data(wire_openai.chunk(ids, delta, finish, with_usage_field=include_usage))

    yield chunk({"role": "assistant", "content": ""})
    reply: Reply | None = None
    try:
        async for item in items:
            if isinstance(item, Reply):
                reply = item
            elif item:
                yield chunk({"content": item})
    except Exception as exc:  # the engine failed mid-stream: tell the client in OpenAI's error shape
        on_error()
        kind, message = _error_message(exc)
        yield _data(wire_openai.error_body(message, type_="server_error" if kind == "api_error" else kind))
        return
    assert reply is not None
    on_reply(reply)
    if reply.tool_calls:
        yield chunk(wire_openai.tool_call_deltas(reply.tool_calls))
    yield chunk({}, reply.finish)
    if include_usage:
        yield _data(wire_openai.usage_chunk(ids, reply))
    yield "data: [DONE]\n\n"


async def anthropic_events(
    prepared: PreparedCall,
    message_id: str,
    model: str,
    items: AsyncIterator[str | Reply],
    started: PrefillStarted | None,
    *,
    on_reply: Callable[[Reply], None],
    on_error: Callable[[], None],
) -> AsyncIterator[str]:
    if started is not None:
        # Anthropic reports the read / written / uncached split in message_start already, and
        # clients may take it from there; the engine's match for this request makes it exact.
        start_usage = wire_anthropic.usage(prepared, started.prompt_tokens, started.cached_tokens, 0)
    else:
        # An engine that does not announce its prefill: the prompt counts as input for now and the
        # cache fields stay unset; message_delta then carries the final split, which clients (the
        # SDK's stream accumulator included) apply over message_start's values.
        start_usage = {"input_tokens": prepared.prompt_tokens, "output_tokens": 0}
    yield _event("message_start", {
        "type": "message_start",
        "message": {"id": message_id, "type": "message", "role": "assistant", "content": [], "model": model,
                    "stop_reason": None, "stop_sequence": None, "usage": start_usage},
    })
    index = 0
    text_open = False

    def text_delta(text: str) -> list[str]:
        nonlocal text_open
        events = []
        if not text_open:
            text_open = True
            events.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                         "content_block": {"type": "text", "text": ""}}))
        events.append(_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                     "delta": {"type": "text_delta", "text": text}}))
        return events

    reply: Reply | None = None
    try:
        async for item in items:
            if isinstance(item, Reply):
                reply = item
            elif item:
                for event in text_delta(item):
                    yield event
    except Exception as exc:
        on_error()
        kind, message = _error_message(exc)
        yield _event("error", wire_anthropic.error_body(message, type_=kind))
        return
    assert reply is not None
    on_reply(reply)
    if not text_open and not reply.tool_calls:
        for event in text_delta(""):  # an empty reply is still one (empty) text block
            yield event
    if text_open:
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in reply.tool_calls:
        yield _event("content_block_start", {
            "type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
        })
        yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": {"type": "input_json_delta", "partial_json": call.arguments_json()}})
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    r = reply.result
    yield _event("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": wire_anthropic.stop_reason(reply), "stop_sequence": reply.stop_sequence},
        "usage": wire_anthropic.usage(prepared, r.prompt_tokens, r.cached_tokens, r.completion_tokens),
    })
    yield _event("message_stop", {"type": "message_stop"})
