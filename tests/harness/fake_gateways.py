"""The recording fake server, extended with the transports of Claude's cloud gateways, so the
`anthropic` SDK's own `AnthropicBedrock` / `AnthropicVertex` clients can talk to it on 127.0.0.1:

- Bedrock `POST /model/{model id}/invoke-with-response-stream`: the Messages stream's events, each
  JSON event base64-encoded as `{"bytes": ...}` in a `chunk` frame of AWS's binary event-stream
  encoding (prelude with lengths and CRC32, string headers, payload, message CRC32), as Bedrock
  Runtime's InvokeModelWithResponseStream sends it; `/invoke` answers the plain JSON message.
- Vertex `POST /v1/projects/{p}/locations/{r}/publishers/anthropic/models/{m}:streamRawPredict`:
  the Messages SSE stream unchanged (`:rawPredict` the JSON message).

Everything else (OpenRouter, Azure: OpenAI's Chat Completions under other paths) is answered by
the base server. Tests only.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from http.server import BaseHTTPRequestHandler
from typing import Any

from fake_llm_server import FakeLLMServer, Recorded, Reply, Script, anthropic_events, anthropic_message

_BEDROCK = re.compile(r"^/model/(?P<model>[^/]+)/(?P<op>invoke-with-response-stream|invoke)$")
_VERTEX = re.compile(r"/publishers/anthropic/models/(?P<model>[^/:]+):(?P<op>streamRawPredict|rawPredict)$")


def event_stream_frame(payload: bytes, headers: dict[str, str]) -> bytes:
    """One message of AWS's event-stream encoding (all headers of string type, 7)."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        encoded += struct.pack("!B", len(raw_name)) + raw_name + b"\x07" + struct.pack("!H", len(raw_value)) + raw_value
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack("!I", zlib.crc32(message) & 0xFFFFFFFF)


def bedrock_chunk(event: dict[str, Any]) -> bytes:
    body = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()}).encode()
    return event_stream_frame(body, {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"})


def _sse_data(event: bytes) -> dict[str, Any]:
    """The JSON of one SSE event the base server would have sent."""
    for line in event.decode().splitlines():
        if line.startswith("data: "):
            return json.loads(line[len("data: ") :])
    raise ValueError(f"no data line in {event!r}")


class FakeGatewayServer(FakeLLMServer):
    counted_tokens: int | None = None
    """When set, `POST .../messages/count_tokens` answers `{"input_tokens": counted_tokens}`."""

    def _answer(self, handler: BaseHTTPRequestHandler, record: Recorded, item: Script) -> None:
        path = record.path.split("?", 1)[0]
        if path.endswith("/messages/count_tokens") and self.counted_tokens is not None:
            self._json(handler, {"input_tokens": self.counted_tokens}, {})
            return
        bedrock = _BEDROCK.match(path)
        vertex = _VERTEX.search(path)
        if (bedrock is None and vertex is None) or not isinstance(item, Reply):
            super()._answer(handler, record, item)
            return
        match = bedrock or vertex
        assert match is not None
        model = match.group("model")
        streamed = match.group("op") in ("invoke-with-response-stream", "streamRawPredict")
        if not streamed:
            request = json.loads(record.body or b"{}")
            self._json(handler, anthropic_message(item, model, request.get("max_tokens")), item.headers)
            return
        events = anthropic_events(item, model)
        if vertex is not None:
            self._stream(handler, events, item.headers)
            return
        frames = [bedrock_chunk(_sse_data(e)) for e in events if _sse_data(e).get("type") != "ping"]
        handler.send_response(200)
        handler.send_header("content-type", "application/vnd.amazon.eventstream")
        handler.send_header("x-amzn-requestid", "req_fake")
        handler.send_header("connection", "close")
        handler.end_headers()
        for frame in frames:
            handler.wfile.write(frame)
            handler.wfile.flush()
        handler.close_connection = True
