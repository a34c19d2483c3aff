"""OpenAI Chat Completions wire format: request models, conversion to `ChatRequest`, response shapes.

Usage follows OpenAI: `prompt_tokens` counts every prompt token including cached ones, and
`prompt_tokens_details.cached_tokens` is always present (0 on a miss) - unlike vLLM and SGLang,
which report it only behind a server flag.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, AsyncIterator, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hitrate.engine import constraints

from hitrate.engine.wire import sse as wire_sse
from hitrate.engine.api import EngineError
from hitrate.engine.chat import ChatMessage
from hitrate.engine.serving import (ChatRequest, ForcedToolCall, MinP, Reply, RequestError, Seed, StopList, StopText, TopK,
                                    top_k_value, validation_message)
from hitrate.engine.toolcalls import ToolCall


class _Lenient(BaseModel):
    # Clients send fields this server does not use (metadata, store, ...): accept and ignore them.
    model_config = ConfigDict(extra="allow")


class FunctionCall(_Lenient):
    name: str
    arguments: str = ""


class MessageToolCall(_Lenient):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class ContentPart(_Lenient):
    type: str
    text: str | None = None


class Message(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class FunctionDef(_Lenient):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(_Lenient):
    type: Literal["function"] = "function"
    function: FunctionDef


class StreamOptions(_Lenient):
    include_usage: bool = False


class ChatCompletionRequest(_Lenient):
    model: str
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: TopK | None = None
    min_p: MinP | None = None
    stop: StopText | StopList | None = None
    seed: Seed | None = None
    n: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    cache_salt: str | None = None  # vLLM's field for tenant isolation of the prefix cache
    chat_template_kwargs: dict[str, Any] | None = None  # vLLM's pass-through to the chat template
    logprobs: bool | None = None
    response_format: dict[str, Any] | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[str, float] | None = None


def _text(content: str | list[ContentPart] | None, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.type != "text" or part.text is None:
            raise RequestError(f"{where}: content parts of type {part.type!r} are not supported (text only)",
                               param="messages")
        texts.append(part.text)
    return "\n".join(texts)


def _arguments(raw: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise RequestError(f"{where}: function.arguments is not valid JSON ({exc.msg})", param="messages") from exc
    if not isinstance(value, dict):
        raise RequestError(f"{where}: function.arguments must encode a JSON object", param="messages")
    return value


def chat_messages(body_messages: list[Message]) -> list[ChatMessage]:
    """The wire's messages in the engine's form, assistant tool calls and tool results included
    (shared with `/tokenize`, whose count must equal the chat endpoint's `prompt_tokens`)."""
    messages: list[ChatMessage] = []
    tool_names_by_call: dict[str, str] = {}
    for i, m in enumerate(body_messages):
        where = f"messages[{i}]"
        if m.role in ("system", "developer"):
            messages.append(ChatMessage(role="system", content=_text(m.content, where)))
        elif m.role == "user":
            messages.append(ChatMessage(role="user", content=_text(m.content, where)))
        elif m.role == "assistant":
            calls = tuple(
                ToolCall(name=c.function.name, arguments=_arguments(c.function.arguments, where), id=c.id)
                for c in m.tool_calls or []
            )
            tool_names_by_call.update({c.id: c.name for c in calls if c.id})
            messages.append(ChatMessage(role="assistant", content=_text(m.content, where), tool_calls=calls))
        else:
            if not m.tool_call_id:
                raise RequestError(f"{where}: a tool message needs tool_call_id", param="messages")
            messages.append(ChatMessage(role="tool", content=_text(m.content, where), tool_call_id=m.tool_call_id,
                                        name=m.name or tool_names_by_call.get(m.tool_call_id)))
    return messages


def to_chat_request(body: ChatCompletionRequest, *, salt: str) -> ChatRequest:
    """Validate what this server cannot honour and convert to the wire-neutral request."""
    if body.n not in (None, 1):
        raise RequestError("n > 1 is not supported; send separate requests", param="n")
    if body.logprobs:
        raise RequestError("logprobs are not supported by this server", param="logprobs")
    for name in ("frequency_penalty", "presence_penalty"):
        if getattr(body, name):
            raise RequestError(f"{name} is not supported by this server (send 0 or omit it)", param=name)
    if body.logit_bias:
        raise RequestError("logit_bias is not supported by this server", param="logit_bias")
    tools = [t.model_dump(exclude_none=True) for t in body.tools or []]
    grammar = response_format_grammar(body.response_format)
    forced = None
    parse_calls = True
    choice = body.tool_choice
    if choice in (None, "auto"):
        pass
    elif choice == "none":
        parse_calls = False  # the tools stay in the prompt (so its cache survives), calls are not parsed
    else:
        if grammar is not None:
            raise RequestError("tool_choice that forces a call cannot be combined with a response_format",
                               param="tool_choice")
        forced = forced_call(choice, tools)

    messages = chat_messages(body.messages)
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    return ChatRequest(
        messages=messages,
        tools=tools,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=top_k_value(body.top_k),
        min_p=body.min_p,
        stop=tuple(s for s in stop if s),
        seed=body.seed,
        salt=salt,
        parse_tool_calls=parse_calls,
        template_kwargs=body.chat_template_kwargs,
        call_id_prefix="call_",
        grammar=grammar,
        forced_tool=forced,
    )


def response_format_grammar(response_format: dict[str, Any] | None) -> str | None:
    """`response_format` (OpenAI: `{"type": "json_object"}` or `{"type": "json_schema", "json_schema":
    {"name": ..., "schema": {...}, "strict": ...}}`) as a grammar; None for text."""
    kind = (response_format or {}).get("type")
    try:
        if kind in (None, "text"):
            return None
        if kind == "json_object":
            return constraints.json_object_grammar()
        if kind == "json_schema":
            spec = response_format.get("json_schema") or {}
            schema = spec.get("schema") if isinstance(spec, dict) else None
            if not isinstance(schema, dict):
                raise RequestError("response_format json_schema needs json_schema.schema (a JSON object)",
                                   param="response_format")
            return constraints.json_schema_grammar(schema)
    except RequestError:
        raise
    except (EngineError, ValueError) as exc:
        raise RequestError(f"response_format: {exc}", param="response_format") from exc
    raise RequestError(f"response_format type {kind!r} is not supported; use text, json_object or json_schema",
                       param="response_format")


def forced_call(choice: str | dict[str, Any], tools: list[dict[str, Any]]) -> ForcedToolCall:
    """`tool_choice` "required" (any tool) or `{"type": "function", "function": {"name": ...}}`."""
    if choice == "required":
        name = None
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
    else:
        raise RequestError("tool_choice must be 'auto', 'none', 'required' or "
                           "{'type': 'function', 'function': {'name': ...}}", param="tool_choice")
    if not tools:
        raise RequestError("tool_choice forces a tool call, but no tools are offered", param="tool_choice")
    if name is not None and name not in [t.get("function", {}).get("name") for t in tools]:
        raise RequestError(f"tool_choice names {name!r}, which is not among the tools offered", param="tool_choice")
    return ForcedToolCall(name)


def parse_request(payload: Any, *, salt_header: str | None) -> tuple[ChatCompletionRequest, ChatRequest]:
    try:
        body = ChatCompletionRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(validation_message(exc)) from exc
    # The X-Cache-Salt header wins over the body field, so a gateway can impose the tenant.
    salt = salt_header if salt_header is not None else (body.cache_salt or "")
    return body, to_chat_request(body, salt=salt)


# --------------------------------------------------------------------- responses


def error_body(message: str, *, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def usage(reply: Reply) -> dict[str, Any]:
    r = reply.result
    return {
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "total_tokens": r.prompt_tokens + r.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": r.cached_tokens},
    }


def _tool_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
        for c in calls
    ]


class CompletionIds:
    """id / created / model shared by a response and all chunks of its stream."""

    def __init__(self, model: str) -> None:
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model


def completion(ids: CompletionIds, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or (None if reply.tool_calls else "")}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply.tool_calls)
    return {
        "id": ids.id,
        "object": "chat.completion",
        "created": ids.created,
        "model": ids.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish, "logprobs": None}],
        "usage": usage(reply),
    }


def chunk(ids: CompletionIds, delta: dict[str, Any], finish_reason: str | None = None,
          *, with_usage_field: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": ids.id,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": ids.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
    if with_usage_field:
        out["usage"] = None  # OpenAI sends usage: null on every chunk but the last when usage is asked for
    return out


def tool_call_deltas(calls: list[ToolCall]) -> dict[str, Any]:
    return {"tool_calls": [{"index": i, **c} for i, c in enumerate(_tool_calls(calls))]}


def usage_chunk(ids: CompletionIds, reply: Reply) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": ids.model,
        "choices": [],
        "usage": usage(reply),
    }

# --------------------------------------------------------------------- stream
# `data: {chat.completion.chunk}` lines: a role chunk, content deltas, tool calls (each whole, in
# one delta), a chunk with `finish_reason`, then (with `stream_options.include_usage`) a chunk
# with empty `choices` and the usage, then `data: [DONE]`. An engine failure after the stream
# started is sent as an error object in the stream.


async def stream_events(
    ids: CompletionIds,
    items: AsyncIterator[str | Reply],
    include_usage: bool,
    *,
    on_reply: Callable[[Reply], None],
    on_error: Callable[[], None],
) -> AsyncIterator[str]:
    def line(delta: dict[str, Any], finish: str | None = None) -> str:
        return wire_sse.data(chunk(ids, delta, finish, with_usage_field=include_usage))

    yield line({"role": "assistant", "content": ""})
    reply: Reply | None = None
    try:
        async for item in items:
            if isinstance(item, Reply):
                reply = item
            elif item:
                yield line({"content": item})
    except Exception as exc:  # the engine failed mid-stream: tell the client in OpenAI's error shape
        on_error()
        internal, message = wire_sse.failure(exc)
        yield wire_sse.data(error_body(message, type_="server_error" if internal else "invalid_request_error"))
        return
    assert reply is not None
    on_reply(reply)
    if reply.tool_calls:
        yield line(tool_call_deltas(reply.tool_calls))
    yield line({}, reply.finish)
    if include_usage:
        yield wire_sse.data(usage_chunk(ids, reply))
    yield "data: [DONE]\n\n"
