"""OpenAI Responses API (`POST /v1/responses`): request parsing, the response object, its event
stream and its error shape.

Input: a string, or a list of items - messages (`role` + text or `input_text` / `output_text`
parts), `function_call` and `function_call_output`; `instructions` become the system turn. Tools
are flat function tools (`{"type": "function", "name", "parameters"}`); `tool_choice` and
`text.format` (json_schema / json_object) are honoured through constrained decoding. The server
keeps no conversation state, so `previous_response_id` is refused, and `store` is ignored.

Output: one `message` item with the text (when there is any), then one `function_call` item per
parsed tool call. Usage: `input_tokens` (cached ones included), `input_tokens_details.cached_tokens`,
`output_tokens`. Streaming sends `response.created`, `response.in_progress`, per item
`response.output_item.added`, its deltas (`response.output_text.delta`,
`response.function_call_arguments.delta`) and `...done` events, then `response.completed` (or
`response.incomplete` when max_output_tokens cut the reply), each with a `sequence_number`.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, AsyncIterator, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hitrate.engine.wire import sse as wire_sse
from hitrate.engine.chat import ChatMessage
from hitrate.engine.serving import (ChatRequest, ForcedToolCall, MinP, Reply, RequestError, TopK, top_k_value,
                                    validation_message)
from hitrate.engine.toolcalls import ToolCall
from hitrate.engine.wire.openai import response_format_grammar


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class ResponsesRequest(_Lenient):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: TopK | None = None
    min_p: MinP | None = None
    stream: bool = False
    previous_response_id: str | None = None
    parallel_tool_calls: bool | None = None
    cache_salt: str | None = None
    reasoning: dict[str, Any] | None = None


class _TextPart(_Lenient):
    type: str
    text: str | None = None


class _MessageItem(_Lenient):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[_TextPart] | None = None


class _FunctionCallItem(_Lenient):
    type: Literal["function_call"]
    name: str = Field(min_length=1)
    arguments: str | dict[str, Any] | None = None
    call_id: str = ""


class _FunctionCallOutputItem(_Lenient):
    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1)
    output: str | list[_TextPart] | None = None


class _FunctionTool(_Lenient):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


# Input items by `type` (absent: a message). Each is validated on its own so that an error names
# the item (`input[3]`) and a wrong type is a 400, never a crash further in.
_ITEM_MODELS: dict[str, type[_Lenient]] = {
    "message": _MessageItem,
    "function_call": _FunctionCallItem,
    "function_call_output": _FunctionCallOutputItem,
}


def _validated(model: type[_Lenient], value: Any, where: str, param: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise RequestError(f"{where}: {validation_message(exc).removeprefix('invalid request: ')}", param=param) from exc


def _content_text(content: str | list[_TextPart] | None, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.type not in ("input_text", "output_text", "text"):
            raise RequestError(f"{where}: content parts of type {part.type!r} are not supported (text only)",
                               param="input")
        texts.append(part.text or "")
    return "\n".join(texts)


def _arguments(raw: str | dict[str, Any] | None, where: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
    except json.JSONDecodeError as exc:
        raise RequestError(f"{where}: arguments is not valid JSON ({exc.msg})", param="input") from exc
    if not isinstance(value, dict):
        raise RequestError(f"{where}: arguments must encode a JSON object", param="input")
    return value


def _messages(body: ResponsesRequest) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    if body.instructions:
        messages.append(ChatMessage(role="system", content=body.instructions))
    items = [{"role": "user", "content": body.input}] if isinstance(body.input, str) else body.input
    names: dict[str, str] = {}
    for i, raw in enumerate(items):
        where = f"input[{i}]"
        kind = raw.get("type", "message")
        if kind == "reasoning":
            continue  # reasoning from another model: this engine's model does not read it
        model = _ITEM_MODELS.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise RequestError(f"{where}: input items of type {kind!r} are not supported", param="input")
        item = _validated(model, raw, where, "input")
        if isinstance(item, _MessageItem):
            role = "system" if item.role == "developer" else item.role
            messages.append(ChatMessage(role=role, content=_content_text(item.content, where)))
        elif isinstance(item, _FunctionCallItem):
            call = ToolCall(name=item.name, arguments=_arguments(item.arguments, where), id=item.call_id)
            names[call.id] = call.name
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":  # calls of one turn share one assistant message
                messages[-1] = ChatMessage(role="assistant", content=last.content,
                                           tool_calls=tuple(last.tool_calls) + (call,))
            else:
                messages.append(ChatMessage(role="assistant", content="", tool_calls=(call,)))
        else:
            text = item.output if isinstance(item.output, str) else _content_text(item.output, where)
            messages.append(ChatMessage(role="tool", content=text, tool_call_id=item.call_id,
                                        name=names.get(item.call_id)))
    if not messages or all(m.role == "system" for m in messages):
        raise RequestError("input holds no message", param="input")
    return messages


def _tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for i, raw in enumerate(tools or []):
        tool = _validated(_FunctionTool, raw, f"tools[{i}]", "tools")
        if tool.type != "function" or not tool.name:
            raise RequestError(f"tools[{i}]: only function tools with a name are supported here "
                               f"(got type {tool.type!r})", param="tools")
        fn: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters or {"type": "object"}}
        if tool.description:
            fn["description"] = tool.description
        out.append({"type": "function", "function": fn})
    return out


def parse_request(payload: Any, *, salt_header: str | None) -> tuple[ResponsesRequest, ChatRequest]:
    try:
        body = ResponsesRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(validation_message(exc)) from exc
    if body.previous_response_id:
        raise RequestError("previous_response_id is not supported: this server stores no responses; send the "
                           "whole conversation in input", param="previous_response_id")
    tools = _tools(body.tools)
    fmt = (body.text or {}).get("format")
    if fmt is not None and not isinstance(fmt, dict):
        raise RequestError("text.format must be an object such as {'type': 'json_schema', 'schema': {...}}",
                           param="text")
    grammar = None
    if fmt:
        # The Responses API flattens chat's {"json_schema": {"schema": ...}} into the format object.
        response_format = {"type": fmt.get("type"), "json_schema": fmt} if fmt.get("type") == "json_schema" else fmt
        grammar = response_format_grammar(response_format)
    choice = body.tool_choice
    forced = None
    parse_calls = choice != "none"
    if choice == "required" or isinstance(choice, dict):
        name = choice.get("name") if isinstance(choice, dict) else None
        if isinstance(choice, dict) and (choice.get("type") != "function" or not isinstance(name, (str, type(None)))):
            raise RequestError("tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name': ...}",
                               param="tool_choice")
        if not tools:
            raise RequestError("tool_choice forces a tool call, but no tools are offered", param="tool_choice")
        if name is not None and name not in [t["function"]["name"] for t in tools]:
            raise RequestError(f"tool_choice names {name!r}, which is not among the tools offered", param="tool_choice")
        # As OpenAI does (instructor's RESPONSES_TOOLS mode sends both): a forced call writes no
        # text, so text.format has nothing to shape; the call follows its tool's schema.
        grammar = None
        forced = ForcedToolCall(name)
    elif choice not in (None, "auto", "none"):
        raise RequestError("tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name': ...}",
                           param="tool_choice")
    salt = salt_header if salt_header is not None else (body.cache_salt or "")
    request = ChatRequest(
        messages=_messages(body),
        tools=tools,
        max_tokens=body.max_output_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=top_k_value(body.top_k),
        min_p=body.min_p,
        salt=salt,
        parse_tool_calls=parse_calls,
        call_id_prefix="call_",
        grammar=grammar,
        forced_tool=forced,
    )
    return body, request


# --------------------------------------------------------------------- responses


def error_body(message: str, *, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class ResponseIds:
    def __init__(self, model: str) -> None:
        self.id = "resp_" + uuid.uuid4().hex
        self.created_at = int(time.time())
        self.model = model
        self.message_id = "msg_" + uuid.uuid4().hex
        self.sequence = 0

    def next_sequence(self) -> int:
        self.sequence += 1
        return self.sequence - 1


def usage(reply: Reply) -> dict[str, Any]:
    r = reply.result
    return {
        "input_tokens": r.prompt_tokens,
        "input_tokens_details": {"cached_tokens": r.cached_tokens},
        "output_tokens": r.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": r.prompt_tokens + r.completion_tokens,
    }


def _message_item(ids: ResponseIds, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"id": ids.message_id, "type": "message", "role": "assistant", "status": status, "content": content}


def _call_item(call: ToolCall, status: str = "completed") -> dict[str, Any]:
    return {"id": "fc_" + call.id.removeprefix("call_"), "type": "function_call", "call_id": call.id,
            "name": call.name, "arguments": call.arguments_json() if status == "completed" else "", "status": status}


def _output(ids: ResponseIds, reply: Reply) -> list[dict[str, Any]]:
    items = [_message_item(ids, reply.content, "completed")] if reply.content or not reply.tool_calls else []
    return items + [_call_item(c) for c in reply.tool_calls]


def _status(reply: Reply | None) -> tuple[str, dict[str, Any] | None]:
    if reply is not None and reply.finish == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    return "completed", None


def response(ids: ResponseIds, body: ResponsesRequest, reply: Reply | None) -> dict[str, Any]:
    status, incomplete = _status(reply) if reply is not None else ("in_progress", None)
    return {
        "id": ids.id,
        "object": "response",
        "created_at": ids.created_at,
        "model": ids.model,
        "status": status,
        "incomplete_details": incomplete,
        "error": None,
        "instructions": body.instructions,
        "output": _output(ids, reply) if reply is not None else [],
        "parallel_tool_calls": body.parallel_tool_calls if body.parallel_tool_calls is not None else True,
        "tool_choice": body.tool_choice or "auto",
        "tools": body.tools or [],
        "temperature": body.temperature,
        "top_p": body.top_p,
        "max_output_tokens": body.max_output_tokens,
        "text": body.text or {"format": {"type": "text"}},
        "usage": usage(reply) if reply is not None else None,
        "metadata": {},
    }


async def stream_events(
    ids: ResponseIds,
    body: ResponsesRequest,
    items: AsyncIterator[str | Reply],
    *,
    on_reply: Callable[[Reply], None],
    on_error: Callable[[], None],
) -> AsyncIterator[str]:
    def event(kind: str, **fields: Any) -> str:
        return wire_sse.event(kind, {"type": kind, "sequence_number": ids.next_sequence(), **fields})

    yield event("response.created", response=response(ids, body, None))
    yield event("response.in_progress", response=response(ids, body, None))
    text: list[str] = []
    opened = False
    reply: Reply | None = None
    try:
        async for item in items:
            if isinstance(item, Reply):
                reply = item
                continue
            if not item:
                continue
            if not opened:
                opened = True
                yield event("response.output_item.added", output_index=0, item=_message_item(ids, "", "in_progress"))
                yield event("response.content_part.added", item_id=ids.message_id, output_index=0, content_index=0,
                            part={"type": "output_text", "text": "", "annotations": []})
            text.append(item)
            yield event("response.output_text.delta", item_id=ids.message_id, output_index=0, content_index=0,
                        delta=item, logprobs=[])
    except Exception as exc:  # the engine failed mid-stream: Responses' in-stream error event
        on_error()
        internal, message = wire_sse.failure(exc)
        yield event("error", code="server_error" if internal else "invalid_request_error", message=message, param=None)
        return
    assert reply is not None
    on_reply(reply)
    index = 0
    if opened or not reply.tool_calls:
        if not opened:
            yield event("response.output_item.added", output_index=0, item=_message_item(ids, "", "in_progress"))
            yield event("response.content_part.added", item_id=ids.message_id, output_index=0, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []})
        part = {"type": "output_text", "text": "".join(text), "annotations": []}
        yield event("response.output_text.done", item_id=ids.message_id, output_index=0, content_index=0,
                    text=part["text"], logprobs=[])
        yield event("response.content_part.done", item_id=ids.message_id, output_index=0, content_index=0, part=part)
        yield event("response.output_item.done", output_index=0, item=_message_item(ids, part["text"], "completed"))
        index = 1
    for offset, call in enumerate(reply.tool_calls):
        item = _call_item(call, "in_progress")
        yield event("response.output_item.added", output_index=index + offset, item=item)
        arguments = call.arguments_json()
        yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index + offset,
                    delta=arguments)
        yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index + offset,
                    name=call.name, arguments=arguments)
        yield event("response.output_item.done", output_index=index + offset, item=_call_item(call))
    final = response(ids, body, reply)
    yield event("response.completed" if final["status"] == "completed" else "response.incomplete", response=final)
