"""Anthropic Messages wire format: request models, conversion to `ChatRequest`, response shapes.

Usage follows Anthropic: `input_tokens` counts only the prompt tokens that were neither read from
the cache nor written under a cache_control mark, so that
`input_tokens + cache_creation_input_tokens + cache_read_input_tokens` is the whole prompt.

The engine caches every prompt automatically (like OpenAI), so what counts as a cache *write* is
defined by the marks: the tokens between the cached prefix and the furthest marked prefix are
reported as `cache_creation_input_tokens` (split by the mark's TTL in `cache_creation`); without
marks nothing is reported as written and the uncached remainder is `input_tokens`.
"""

from __future__ import annotations

import dataclasses

import uuid
from typing import Annotated, Any, AsyncIterator, Callable, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from hitrate.engine import constraints

from hitrate.engine.wire import sse as wire_sse
from hitrate.engine.api import EngineError, PrefillStarted
from hitrate.engine.chat import ChatMessage
from hitrate.engine.serving import (ChatRequest, ForcedToolCall, MarkedPrefix, PreparedCall, Reply, RequestError, StopList,
                                    TopK, top_k_value, validation_message)
from hitrate.engine.toolcalls import ToolCall

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class CacheControl(_Lenient):
    type: Literal["ephemeral"] = "ephemeral"
    ttl: Literal["5m", "1h"] = "5m"


class TextBlock(_Lenient):
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None


class ToolUseBlock(_Lenient):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    cache_control: CacheControl | None = None


class ToolResultBlock(_Lenient):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None


class ThinkingBlock(_Lenient):
    type: Literal["thinking", "redacted_thinking"]


class OtherBlock(_Lenient):
    type: str


def _block_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if kind == "redacted_thinking":
        return "thinking"
    return kind if kind in ("text", "tool_use", "tool_result", "thinking") else "other"


# Discriminated by `type`, so a malformed known block (a text block without text) is reported as
# such instead of slipping through as an unknown kind.
Block = Annotated[
    Union[
        Annotated[TextBlock, Tag("text")],
        Annotated[ToolUseBlock, Tag("tool_use")],
        Annotated[ToolResultBlock, Tag("tool_result")],
        Annotated[ThinkingBlock, Tag("thinking")],
        Annotated[OtherBlock, Tag("other")],
    ],
    Discriminator(_block_kind),
]


class Message(_Lenient):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class ToolDef(_Lenient):
    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    cache_control: CacheControl | None = None


class ToolChoice(_Lenient):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None


class MessagesRequest(_Lenient):
    model: str
    max_tokens: int = Field(ge=0)
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: ToolChoice | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: TopK | None = None
    stop_sequences: StopList | None = None
    stream: bool = False
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    cache_control: CacheControl | None = None  # automatic caching: one breakpoint on the last block
    cache_salt: str | None = None


def _block_text(block: TextBlock | ToolResultBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if block.content is None or isinstance(block.content, str):
        text = block.content or ""
    else:
        text = "\n".join(b.text for b in block.content)
    # The error flag has no place in chat templates: say it in the text the model reads.
    return f"Error: {text}" if block.is_error else text


def _system_text(system: str | list[TextBlock] | None, upto: int | None = None) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    blocks = system if upto is None else system[: upto + 1]
    return "\n".join(b.text for b in blocks)


def _tools(tools: list[ToolDef] | None) -> list[dict[str, Any]]:
    out = []
    for t in tools or []:
        fn: dict[str, Any] = {"name": t.name, "parameters": t.input_schema}
        if t.description is not None:
            fn = {"name": t.name, "description": t.description, "parameters": t.input_schema}
        out.append({"type": "function", "function": fn})
    return out


def _convert_message(m: Message, index: int, tool_names: dict[str, str], upto: int | None = None) -> list[ChatMessage]:
    """One Anthropic message -> neutral messages (tool results become `tool` messages, in order)."""
    where = f"messages[{index}]"
    if isinstance(m.content, str):
        return [ChatMessage(role=m.role, content=m.content)]
    blocks = m.content if upto is None else m.content[: upto + 1]
    if m.role == "assistant":
        texts, calls = [], []
        for b in blocks:
            if isinstance(b, TextBlock):
                texts.append(b.text)
            elif isinstance(b, ToolUseBlock):
                calls.append(ToolCall(name=b.name, arguments=b.input, id=b.id))
                tool_names[b.id] = b.name
            elif isinstance(b, ThinkingBlock):
                continue  # thinking from elsewhere; this engine's own reasoning stays inside its text
            else:
                raise RequestError(f"{where}: content blocks of type {b.type!r} are not supported in assistant turns")
        return [ChatMessage(role="assistant", content="".join(texts), tool_calls=tuple(calls))]
    out: list[ChatMessage] = []
    pending_text: list[str] = []

    def flush() -> None:
        if pending_text:
            out.append(ChatMessage(role="user", content="\n".join(pending_text)))
            pending_text.clear()

    for b in blocks:
        if isinstance(b, TextBlock) and out and out[-1].role == "tool" and not pending_text:
            # Text after the tool results of one user turn (a harness's per-step context, a
            # reminder) belongs to that turn: made a user message of its own, it would be a new
            # user query to the chat template, and templates such as Qwen3's drop the reasoning
            # of every assistant turn before the last query (so the prefix changes too).
            out[-1] = dataclasses.replace(out[-1], content=out[-1].content + "\n\n" + b.text)
        elif isinstance(b, TextBlock):
            pending_text.append(b.text)
        elif isinstance(b, ToolResultBlock):
            flush()
            out.append(ChatMessage(role="tool", content=_block_text(b), tool_call_id=b.tool_use_id,
                                   name=tool_names.get(b.tool_use_id)))
        else:
            raise RequestError(f"{where}: content blocks of type {b.type!r} are not supported (text and "
                               "tool_result only in user turns)")
    flush()
    return out


def _conversation(body: MessagesRequest, *, system_upto: int | None = None,
                  message_upto: tuple[int, int] | None = None) -> list[ChatMessage]:
    """The neutral conversation, optionally cut after a system block or after block j of message i."""
    messages: list[ChatMessage] = []
    system = _system_text(body.system, system_upto)
    if system:
        messages.append(ChatMessage(role="system", content=system))
    if system_upto is not None:
        # Templates cannot render a system prompt alone; the empty user turn after it falls
        # outside the common prefix that measures the mark.
        return messages + [ChatMessage(role="user", content="")]
    tool_names: dict[str, str] = {}
    for i, m in enumerate(body.messages):
        if message_upto is not None and i == message_upto[0]:
            messages.extend(_convert_message(m, i, tool_names, upto=message_upto[1]))
            break
        messages.extend(_convert_message(m, i, tool_names))
    return messages


def _marks(body: MessagesRequest, tools: list[dict[str, Any]]) -> list[MarkedPrefix]:
    """Every cache_control mark as the conversation cut just after the marked block."""
    marks: list[MarkedPrefix] = []
    # Templates print the system prompt before the tool list, so a tool mark covers the whole
    # system prompt and the tools up to the marked one.
    whole_system = _conversation(body, system_upto=len(body.system) if isinstance(body.system, list) else 0)
    for i, t in enumerate(body.tools or []):
        if t.cache_control:
            marks.append(MarkedPrefix(whole_system, tools[: i + 1], TTL_SECONDS[t.cache_control.ttl]))
    if isinstance(body.system, list):
        for i, b in enumerate(body.system):
            if b.cache_control:
                marks.append(MarkedPrefix(_conversation(body, system_upto=i), tools, TTL_SECONDS[b.cache_control.ttl]))
    for i, m in enumerate(body.messages):
        if isinstance(m.content, str):
            continue
        for j, b in enumerate(m.content):
            cc = getattr(b, "cache_control", None)
            if isinstance(cc, CacheControl):
                marks.append(MarkedPrefix(_conversation(body, message_upto=(i, j)), tools, TTL_SECONDS[cc.ttl]))
    return marks


def parse_request(payload: Any, *, salt_header: str | None) -> tuple[MessagesRequest, ChatRequest]:
    try:
        body = MessagesRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(validation_message(exc)) from exc
    notices: tuple[str, ...] = ()
    if body.thinking and body.thinking.get("type") not in (None, "disabled"):
        # Accepted and ignored, as Anthropic documents for models without extended thinking: the
        # reply simply has no thinking blocks. The `hitrate-notice` response header says so.
        notices = ("thinking ignored: this model has no extended thinking; the reply has no thinking blocks",)
    if body.max_tokens == 0 and body.stream:
        raise RequestError("max_tokens: 0 (cache pre-warm) cannot be streamed", param="max_tokens")
    tools = _tools(body.tools)
    grammar = _output_format_grammar(body.output_config)
    forced = None
    parse_calls = True
    if body.tool_choice is not None:
        parse_calls = body.tool_choice.type != "none"
        if body.tool_choice.type in ("any", "tool"):
            if grammar is not None:
                raise RequestError("tool_choice that forces a call cannot be combined with output_config.format",
                                   param="tool_choice")
            if body.tool_choice.type == "tool" and not body.tool_choice.name:
                raise RequestError("tool_choice of type 'tool' needs a name", param="tool_choice")
            if not tools:
                raise RequestError("tool_choice forces a tool call, but no tools are offered", param="tool_choice")
            name = body.tool_choice.name if body.tool_choice.type == "tool" else None
            if name is not None and name not in [t["function"]["name"] for t in tools]:
                raise RequestError(f"tool_choice names {name!r}, which is not among the tools offered",
                                   param="tool_choice")
            forced = ForcedToolCall(name)
    salt = salt_header if salt_header is not None else (body.cache_salt or "")
    request = ChatRequest(
        messages=_conversation(body),
        tools=tools,
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=top_k_value(body.top_k),
        stop=tuple(s for s in body.stop_sequences or () if s),
        salt=salt,
        parse_tool_calls=parse_calls,
        marks=_marks(body, tools),
        pin_whole_prompt_ttl_s=TTL_SECONDS[body.cache_control.ttl] if body.cache_control else None,
        call_id_prefix="toolu_",
        grammar=grammar,
        forced_tool=forced,
        notices=notices,
    )
    return body, request


def _output_format_grammar(output_config: dict[str, Any] | None) -> str | None:
    """`output_config.format` (`{"type": "json_schema", "schema": {...}}`, Anthropic structured
    outputs) as a grammar; None when absent."""
    fmt = (output_config or {}).get("format")
    if not fmt:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise RequestError("output_config.format must be {'type': 'json_schema', 'schema': {...}}",
                           param="output_config")
    try:
        return constraints.json_schema_grammar(fmt["schema"])
    except (EngineError, ValueError) as exc:
        raise RequestError(f"output_config.format: {exc}", param="output_config") from exc


def count_tokens_request(payload: Any) -> ChatRequest:
    """`/v1/messages/count_tokens` takes a Messages body without max_tokens."""
    if isinstance(payload, dict):
        payload = {"max_tokens": 1, **payload}
    return parse_request(payload, salt_header=None)[1]


# --------------------------------------------------------------------- responses


def error_body(message: str, *, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def usage(prepared: PreparedCall, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Anthropic's buckets: read + written (under marks, by TTL) + uncached input = prompt."""
    writes = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    covered = cached_tokens
    # Pins sorted by length: each mark writes the tokens between the previous covered point and
    # its own end (1h marks come first in a valid request, so the split follows Anthropic's rule).
    for end, ttl in sorted(prepared.pin_ttl_by_tokens.items()):
        end = min(end, prompt_tokens)
        if end > covered:
            key = "ephemeral_1h_input_tokens" if ttl >= 3600 else "ephemeral_5m_input_tokens"
            writes[key] += end - covered
            covered = end
    written = writes["ephemeral_5m_input_tokens"] + writes["ephemeral_1h_input_tokens"]
    return {
        "input_tokens": prompt_tokens - cached_tokens - written,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached_tokens,
        "cache_creation": writes,
    }


STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def stop_reason(reply: Reply) -> str:
    if reply.stop_sequence is not None:
        return "stop_sequence"
    return STOP_REASONS[reply.finish]


def content_blocks(reply: Reply, *, prewarm: bool = False) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.content or (not reply.tool_calls and not prewarm):
        blocks.append({"type": "text", "text": reply.content})
    blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in reply.tool_calls)
    return blocks


def new_message_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


def message(message_id: str, model: str, prepared: PreparedCall, reply: Reply, *, prewarm: bool = False) -> dict[str, Any]:
    r = reply.result
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content_blocks(reply, prewarm=prewarm),
        "stop_reason": stop_reason(reply),
        "stop_sequence": reply.stop_sequence,
        "usage": usage(prepared, r.prompt_tokens, r.cached_tokens, r.completion_tokens),
    }

# --------------------------------------------------------------------- stream
# `message_start` (with the usage split already exact, as Anthropic sends it), per block
# `content_block_start` / `content_block_delta` / `content_block_stop` (text first, then one
# `tool_use` block per call with its input as one `input_json_delta`), `message_delta` (stop
# reason and usage), `message_stop`. An engine failure after the stream started is sent as an
# `error` event.


async def stream_events(
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
        start_usage = usage(prepared, started.prompt_tokens, started.cached_tokens, 0)
    else:
        # An engine that does not announce its prefill: the prompt counts as input for now and the
        # cache fields stay unset; message_delta then carries the final split, which clients (the
        # SDK's stream accumulator included) apply over message_start's values.
        start_usage = {"input_tokens": prepared.prompt_tokens, "output_tokens": 0}
    yield wire_sse.event("message_start", {
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
            events.append(wire_sse.event("content_block_start", {"type": "content_block_start", "index": index,
                                                         "content_block": {"type": "text", "text": ""}}))
        events.append(wire_sse.event("content_block_delta", {"type": "content_block_delta", "index": index,
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
        internal, message = wire_sse.failure(exc)
        yield wire_sse.event("error", error_body(message, type_="api_error" if internal else "invalid_request_error"))
        return
    assert reply is not None
    on_reply(reply)
    if not text_open and not reply.tool_calls:
        for event in text_delta(""):  # an empty reply is still one (empty) text block
            yield event
    if text_open:
        yield wire_sse.event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in reply.tool_calls:
        yield wire_sse.event("content_block_start", {
            "type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
        })
        yield wire_sse.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": {"type": "input_json_delta", "partial_json": call.arguments_json()}})
        yield wire_sse.event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    r = reply.result
    yield wire_sse.event("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(reply), "stop_sequence": reply.stop_sequence},
        "usage": usage(prepared, r.prompt_tokens, r.cached_tokens, r.completion_tokens),
    })
    yield wire_sse.event("message_stop", {"type": "message_stop"})
