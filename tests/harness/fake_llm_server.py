"""A small recording HTTP server on 127.0.0.1 that speaks just enough Anthropic Messages, OpenAI Chat
Completions and OpenAI Responses for the real SDKs: it stores every request body byte for byte and answers from a script
of canned replies (streamed as SSE, the way each API streams), error statuses, hangs and broken
streams. Tests only.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


NO_DELTA_USAGE: Any = object()
"""`Reply.delta_usage` default: the scripted usage is split between message_start and message_delta."""


@dataclass
class Reply:
    """A successful streamed answer."""

    text: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    """(call id, tool name, arguments JSON text exactly as to be streamed)."""
    usage: dict[str, Any] | None = None
    """The usage payload to report; a per-API default when None. For Anthropic, the prompt counts go in
    message_start and `output_tokens` in message_delta."""
    reasoning: str = ""
    """OpenAI-style `reasoning_content` deltas (DeepSeek); on Responses, the reasoning summary text."""
    reasoning_encrypted: str = ""
    """Responses: a reasoning item with this `encrypted_content` comes first in the output."""
    stop: str | None = None
    """The stop word to send. On Responses, "max_output_tokens" or "content_filter" ends the stream
    with `response.incomplete` and that reason."""
    headers: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    delta_usage: Any = NO_DELTA_USAGE
    """Anthropic: when set, message_start carries `usage` exactly as given (any JSON, or no usage key
    when `usage` is None) and the final message_delta carries this (cumulative counts, any JSON, or
    no usage key when None)."""


@dataclass
class Failure:
    """An HTTP error status with a JSON body."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Accept the request and answer nothing for `seconds` (client timeouts)."""

    seconds: float


@dataclass
class StreamError:
    """Start a 200 stream, then send an Anthropic `event: error` (e.g. overloaded_error). On
    Responses: `response.created`, then an `error` event with `error_type` as its code, or, with
    `failed=True`, a `response.failed` whose error carries that code."""

    error_type: str = "overloaded_error"
    failed: bool = False


@dataclass
class Broken:
    """`reply` streamed with a fault, on whichever wire was asked: the last `cut` events left out
    (a stream that ends before its terminal event: `message_stop`, `[DONE]`, `response.completed`),
    and / or the raw bytes `garbage` sent in place of event number `at` (e.g. a data line that is
    not JSON), and / or a silence in the middle of the stream."""

    reply: Reply = field(default_factory=Reply)
    cut: int = 0
    garbage: bytes | None = None
    at: int = 1
    stall_after: int | None = None
    """Send this many events, then go silent for `stall_s` seconds (then the rest)."""
    stall_s: float = 0.0


@dataclass
class RawStream:
    """A 200 stream of exactly these events, each (SSE event name or None, JSON data), for replaying
    a provider's documented payloads field for field."""

    events: list[tuple[str | None, Any]]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Script = Reply | Failure | Hang | StreamError | Broken | RawStream


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return (head + f"data: {payload}\n\n").encode()


def _pieces(text: str, n: int = 3) -> list[str]:
    """Split text into up to n fragments (streams deliver arguments in pieces)."""
    if len(text) < n:
        return [text] if text else []
    step = max(1, len(text) // n)
    return [text[i : i + step] for i in range(0, len(text), step)]


def anthropic_events(reply: Reply, model: str) -> list[bytes]:
    if reply.delta_usage is not NO_DELTA_USAGE:
        start_usage: Any = reply.usage
        delta_usage: Any = reply.delta_usage
    else:
        usage = dict(reply.usage or {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 5})
        delta_usage = {"output_tokens": usage.pop("output_tokens", 5)}
        start_usage = dict(usage, output_tokens=1)
    message: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": reply.model or model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }
    if start_usage is not None:
        message["usage"] = start_usage
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": message,
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    index = 0
    if reply.text:
        out.append(_sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}))
        for piece in _pieces(reply.text):
            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, arguments in reply.tool_calls:
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
            )
        )
        for piece in _pieces(arguments):
            out.append(
                _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})
            )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = reply.stop or ("tool_use" if reply.tool_calls else "end_turn")
    out.append(
        _sse(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             **({"usage": delta_usage} if delta_usage is not None else {})},
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def anthropic_message(reply: Reply, model: str, max_tokens: int | None) -> dict[str, Any]:
    """A non-streamed Messages reply. With `max_tokens: 0` (a cache pre-warm) it has no content and
    reports no output, whatever the script says."""
    usage = dict(reply.usage or {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 5})
    content: list[dict[str, Any]] = []
    if max_tokens == 0:
        usage["output_tokens"] = 0
    elif reply.text:
        content.append({"type": "text", "text": reply.text})
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": reply.model or model, "content": content,
            "stop_reason": "max_tokens" if max_tokens == 0 else (reply.stop or "end_turn"), "stop_sequence": None,
            "usage": usage}


def openai_events(reply: Reply, model: str, include_usage: bool) -> list[bytes]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": reply.model or model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}]))

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(reply.reasoning):
        out.append(chunk({"reasoning_content": piece}))
    for piece in _pieces(reply.text):
        out.append(chunk({"content": piece}))
    for i, (call_id, name, arguments) in enumerate(reply.tool_calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}))
        for piece in _pieces(arguments):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    stop = reply.stop or ("tool_calls" if reply.tool_calls else "stop")
    out.append(chunk({}, stop))
    if include_usage:
        usage = reply.usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        out.append(_sse(None, dict(base, choices=[], usage=usage)))
    out.append(_sse(None, "[DONE]"))
    return out


def responses_events(reply: Reply, model: str) -> list[bytes]:
    """A Responses stream: created, one output item per reasoning / message / function call (added,
    deltas, done), then completed (or incomplete) with the usage."""
    seq = iter(range(10_000))
    created_at = 1700000000

    def event(kind: str, **fields: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    def response(status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
        return {"id": "resp_fake", "object": "response", "created_at": created_at, "model": reply.model or model,
                "status": status, "output": output, "usage": usage, "error": None, "incomplete_details": None,
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], **extra}

    out = [event("response.created", response=response("in_progress", [], None))]
    items: list[dict[str, Any]] = []
    if reply.reasoning or reply.reasoning_encrypted:
        index = len(items)
        rid = f"rs_fake_{index}"
        out.append(event("response.output_item.added", output_index=index,
                         item={"id": rid, "type": "reasoning", "summary": []}))
        for piece in _pieces(reply.reasoning):
            out.append(event("response.reasoning_summary_text.delta", item_id=rid, output_index=index,
                             summary_index=0, delta=piece))
        item = {"id": rid, "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reply.reasoning}] if reply.reasoning else [],
                "encrypted_content": reply.reasoning_encrypted or None}
        out.append(event("response.output_item.done", output_index=index, item=item))
        items.append(item)
    if reply.text:
        index = len(items)
        mid = f"msg_fake_{index}"
        out.append(event("response.output_item.added", output_index=index,
                         item={"id": mid, "type": "message", "role": "assistant", "status": "in_progress", "content": []}))
        out.append(event("response.content_part.added", item_id=mid, output_index=index, content_index=0,
                         part={"type": "output_text", "text": "", "annotations": []}))
        for piece in _pieces(reply.text):
            out.append(event("response.output_text.delta", item_id=mid, output_index=index, content_index=0,
                             delta=piece, logprobs=[]))
        part = {"type": "output_text", "text": reply.text, "annotations": []}
        out.append(event("response.output_text.done", item_id=mid, output_index=index, content_index=0,
                         text=reply.text, logprobs=[]))
        out.append(event("response.content_part.done", item_id=mid, output_index=index, content_index=0, part=part))
        item = {"id": mid, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
        out.append(event("response.output_item.done", output_index=index, item=item))
        items.append(item)
    for call_id, name, arguments in reply.tool_calls:
        index = len(items)
        fid = f"fc_fake_{index}"
        out.append(event("response.output_item.added", output_index=index,
                         item={"id": fid, "type": "function_call", "call_id": call_id, "name": name,
                               "arguments": "", "status": "in_progress"}))
        for piece in _pieces(arguments):
            out.append(event("response.function_call_arguments.delta", item_id=fid, output_index=index, delta=piece))
        out.append(event("response.function_call_arguments.done", item_id=fid, output_index=index,
                         name=name, arguments=arguments))
        item = {"id": fid, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
                "status": "completed"}
        out.append(event("response.output_item.done", output_index=index, item=item))
        items.append(item)
    usage = reply.usage or {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    if reply.stop in ("max_output_tokens", "content_filter"):
        out.append(event("response.incomplete",
                         response=response("incomplete", items, usage, incomplete_details={"reason": reply.stop})))
    else:
        out.append(event("response.completed", response=response("completed", items, usage)))
    return out


def responses_stream_error(item: "StreamError", model: str) -> list[bytes]:
    created = {"id": "resp_fake", "object": "response", "created_at": 1700000000, "model": model,
               "status": "in_progress", "output": [], "usage": None}
    out = [_sse("response.created", {"type": "response.created", "sequence_number": 0, "response": created})]
    error = {"code": item.error_type, "message": "The server had an error while processing your request."}
    if item.failed:
        failed = dict(created, status="failed", error=error)
        out.append(_sse("response.failed", {"type": "response.failed", "sequence_number": 1, "response": failed}))
    else:
        out.append(_sse("error", {"type": "error", "sequence_number": 1, "param": None, **error}))
    return out


class FakeLLMServer:
    """Serve scripted answers; record every request. `script` items are consumed in order; when it is
    empty, `default` (a callable from the parsed request to a script item) answers."""

    def __init__(self, default: Callable[[Recorded], Script] | None = None) -> None:
        self.requests: list[Recorded] = []
        self.script: deque[Script] = deque()
        self.default = default
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                record = Recorded(path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body)
                with server._lock:
                    server.requests.append(record)
                    item = server.script.popleft() if server.script else None
                if item is None:
                    if server.default is None:
                        item = Failure(500, {"error": {"type": "api_error", "message": "script exhausted"}})
                    else:
                        item = server.default(record)
                server._answer(self, record, item)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *items: Script) -> None:
        with self._lock:
            self.script.extend(items)

    def start(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def bodies(self, path_suffix: str) -> list[Any]:
        return [r.json() for r in self.requests if r.path.endswith(path_suffix)]

    # ------------------------------------------------------------------------------------------

    def _answer(self, handler: BaseHTTPRequestHandler, record: Recorded, item: Script) -> None:
        anthropic_api = record.path.endswith("/messages")
        responses_api = record.path.endswith("/responses")
        request = json.loads(record.body or b"{}")
        model = request.get("model", "fake-model")
        if isinstance(item, Hang):
            time.sleep(item.seconds)
            handler.close_connection = True
            return
        if isinstance(item, Failure):
            data = json.dumps(item.body).encode()
            handler.send_response(item.status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.send_header("request-id", "req_fake_error")
            for k, v in item.headers.items():
                handler.send_header(k, v)
            handler.end_headers()
            handler.wfile.write(data)
            return
        if isinstance(item, RawStream):
            self._stream(handler, [_sse(name, data) for name, data in item.events], {})
            return
        if isinstance(item, StreamError) and responses_api:
            self._stream(handler, responses_stream_error(item, model), {})
            return
        if isinstance(item, StreamError) and not anthropic_api:
            # Chat Completions: an error object as a data line of a stream that began with 200.
            first = openai_events(Reply(text="x"), model, include_usage=False)[0]
            error = {"error": {"type": item.error_type, "code": None, "param": None,
                               "message": "The server had an error while processing your request."}}
            self._stream(handler, [first, _sse(None, error)], {})
            return
        if isinstance(item, StreamError):
            events = [
                _sse(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
                                    "stop_reason": None, "stop_sequence": None,
                                    "usage": {"input_tokens": 10, "output_tokens": 1}},
                    },
                ),
                _sse("error", {"type": "error", "error": {"type": item.error_type, "message": "Overloaded"}}),
            ]
            self._stream(handler, events, {})
            return
        if isinstance(item, Broken):
            if anthropic_api:
                events = anthropic_events(item.reply, model)
            elif responses_api:
                events = responses_events(item.reply, model)
            else:
                events = openai_events(item.reply, model, bool((request.get("stream_options") or {}).get("include_usage")))
            if item.cut:
                events = events[: -item.cut]
            if item.garbage is not None:
                events = events[: item.at] + [item.garbage] + events[item.at + 1 :]
            self._stream(handler, events, item.reply.headers, stall=(item.stall_after, item.stall_s))
            return
        if anthropic_api and not request.get("stream"):
            self._json(handler, anthropic_message(item, model, request.get("max_tokens")), item.headers)
            return
        if anthropic_api:
            events = anthropic_events(item, model)
        elif responses_api:
            events = responses_events(item, model)
        else:
            include = bool((request.get("stream_options") or {}).get("include_usage"))
            events = openai_events(item, model, include)
        self._stream(handler, events, item.headers)

    @staticmethod
    def _json(handler: BaseHTTPRequestHandler, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("request-id", "req_fake")
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _stream(handler: BaseHTTPRequestHandler, events: list[bytes], headers: dict[str, str],
                stall: tuple[int | None, float] = (None, 0.0)) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("request-id", "req_fake")
        handler.send_header("x-request-id", "req_fake")
        handler.send_header("connection", "close")
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.end_headers()
        for i, event in enumerate(events):
            if i == stall[0]:
                time.sleep(stall[1])
            try:
                handler.wfile.write(event)
                handler.wfile.flush()
            except OSError:
                break  # the client gave up on the stream
        handler.close_connection = True
