"""OpenAI Chat Completions: Prompt -> request body, streamed call through the official SDK -> CallResult.

One adapter serves every server that speaks this API: OpenAI, Azure OpenAI, DeepSeek, Gemini's
OpenAI-compatible endpoint, OpenRouter, vLLM, SGLang, llama.cpp and the bundled engine server. What
differs between them is chosen by `Quirks`, which follow the provider the user named (the host only
for `openai-compat/`; never the model name): which usage fields are read, whether
`prompt_cache_key` is sent, which max-tokens field is understood.

Layout on this wire: one system message (system text, then the project docs), then the transcript.
A user turn becomes one `tool` message per tool result followed by one `user` message with its text
and frozen context blocks; a turn of tool results only carries its context at the end of its last
`tool` message, so no user message is made between tool rounds. Tool-call `arguments` are sent as
the exact string the model streamed.

Cache marks: GPT-5.6+ accepts explicit `prompt_cache_breakpoint`s on content parts, and OpenRouter
passes Anthropic's `cache_control` on content parts through to Claude. When the projection planned
marks for either family, every message is rendered with content-part lists (so adding or moving a
mark never changes how a message is spelled, only the mark itself); otherwise content is a plain
string. Tools and tool calls cannot carry a mark on this wire.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from hitrate.harness.models import Quirks
from hitrate.harness.wire.openai_client import OpenAIClientBackend
from hitrate.harness.wire.stream import StreamedCall
from hitrate.harness.wire.types import (
    BlockKey,
    CallError,
    CallResult,
    OpenAIContent,
    PlannedMarks,
    RenderReport,
    StreamTimer,
    TextSink,
    context_rides_with_tool_results,
    map_stop_reason,
    native_raw,
    sendable_arguments,
)
from hitrate.projection.prompt import Prompt
from hitrate.projection.transcript import (
    AssistantMessage,
    ContextBlock,
    NativeBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)
from hitrate.store import normalize
from hitrate.store.prices import PriceTable
from hitrate.store.usage import Usage

API = "openai_chat"
# Blocks of one user turn are joined with a blank line when content is a plain string.
_JOIN = "\n\n"


class _Renderer(OpenAIContent):
    part_type = "text"
    join = _JOIN

    def __init__(self, prompt: Prompt, marks: PlannedMarks) -> None:
        super().__init__(prompt, marks)
        self.prompt = prompt

    def system(self) -> dict[str, Any] | None:
        pieces = [(t, (k, None, 0)) for k, t in (("system", self.prompt.system), ("docs", self.prompt.docs)) if t]
        if not pieces:
            return None
        return {"role": "system", "content": self.content(pieces)}

    def user(self, mi: int, message: UserMessage) -> list[dict[str, Any]]:
        results: list[tuple[str, list[tuple[str, BlockKey]]]] = []
        pieces: list[tuple[str, BlockKey]] = []
        # Context of a turn of tool results only is appended to its last tool message.
        ride = context_rides_with_tool_results(message)
        for bi, block in enumerate(message.content):
            key = ("message", mi, bi)
            if isinstance(block, ToolResultBlock):
                results.append((block.call_id, [(block.content, key)]))
            elif isinstance(block, ContextBlock):
                (results[-1][1] if ride and results else pieces).append((block.text, key))
            elif isinstance(block, TextBlock) and block.text:
                pieces.append((block.text, key))
        out: list[dict[str, Any]] = [
            {"role": "tool", "tool_call_id": call_id, "content": self.content(parts)} for call_id, parts in results
        ]
        if pieces:
            out.append({"role": "user", "content": self.content(pieces)})
        return out

    def assistant(self, mi: int, message: AssistantMessage) -> dict[str, Any]:
        texts: list[tuple[str, BlockKey]] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for bi, block in enumerate(message.content):
            if isinstance(block, TextBlock) and block.text:
                texts.append((block.text, ("message", mi, bi)))
            elif isinstance(block, ToolCallBlock):
                raw = native_raw(block, API)
                call = json.loads(raw) if raw is not None else {
                    "id": block.call_id, "type": "function", "function": {"name": block.name, "arguments": block.arguments}
                }
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    function["arguments"] = sendable_arguments(function["arguments"])
                calls.append(call)
            elif isinstance(block, ThinkingBlock) and native_raw(block, API) is not None:
                # DeepSeek's thinking mode wants `reasoning_content` back within a tool-calling turn;
                # it is only re-sent to the kind of server that produced it.
                reasoning.append(block.thinking)
        out: dict[str, Any] = {"role": "assistant", "content": self.content(texts) if texts else None}
        if reasoning:
            out["reasoning_content"] = "".join(reasoning)
        if calls:
            out["tool_calls"] = calls
        return out


def render_chat_request(
    prompt: Prompt, quirks: Quirks, *, max_tokens: int, report: RenderReport | None = None
) -> dict[str, Any]:
    """The Chat Completions body for `prompt` (without `stream` / `stream_options`)."""
    marks = PlannedMarks(prompt, report if report is not None else RenderReport())
    r = _Renderer(prompt, marks)
    messages: list[dict[str, Any]] = []
    system = r.system()
    if system is not None:
        messages.append(system)
    for mi, message in enumerate(prompt.messages):
        if isinstance(message, UserMessage):
            messages.extend(r.user(mi, message))
        else:
            messages.append(r.assistant(mi, message))
    marks.finish()

    body: dict[str, Any] = {"model": prompt.model, "messages": messages}
    if prompt.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in prompt.tools
        ]
    body[quirks.max_tokens_field] = max_tokens
    if quirks.send_prompt_cache_key and prompt.prompt_cache_key:
        # OpenAI routes requests to cache machines by a hash of the prefix plus this key; one key
        # per session keeps a session's requests on the machines that hold its prefix.
        body["prompt_cache_key"] = prompt.prompt_cache_key
    return body


# ------------------------------------------------------------------------------------------------
# Usage by dialect
# ------------------------------------------------------------------------------------------------


def normalize_usage(
    raw: dict[str, Any], quirks: Quirks, model: str, timings: dict[str, Any] | None = None, *, prices: PriceTable | None = None,
    write_ttl: str = "5m",
) -> Usage:
    """Normalized usage for a Chat Completions `usage` payload from the server `quirks` describe.
    `write_ttl`: the TTL class a gateway's unsplit cache writes are booked under (OpenRouter)."""
    if not raw:
        return Usage()  # the server sent no usage: every bucket unknown
    dialect = quirks.usage_dialect
    if dialect == "deepseek":
        return normalize.from_deepseek(raw)
    if dialect == "gemini_openai":
        return normalize.from_gemini_openai(raw)
    if dialect == "openrouter":
        return normalize.from_openrouter(raw, write_ttl=write_ttl)
    if dialect == "openai":
        entry = (prices or PriceTable.default()).find(model)
        if entry is not None:
            writes_billed = entry.writes_billed
        else:
            # A model the price table does not know: trust the payload about billed writes.
            details = raw.get("prompt_tokens_details")
            writes_billed = isinstance(details, dict) and bool(details.get("cache_write_tokens"))
        return normalize.from_openai_chat(raw, writes_billed=writes_billed)
    return normalize.from_openai_compatible(raw, timings=timings)


# ------------------------------------------------------------------------------------------------
# Streaming call
# ------------------------------------------------------------------------------------------------


class _ToolCallParts:
    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _Reply:
    """Reasoning, text and tool calls of one streamed reply, assembled from choice deltas."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _ToolCallParts] = {}

    def add(self, delta: Any, timer: StreamTimer, on_text: TextSink | None) -> None:
        reasoning_piece = (delta.model_extra or {}).get("reasoning_content")
        if isinstance(reasoning_piece, str) and reasoning_piece:
            timer.content_arrived()
            self.reasoning.append(reasoning_piece)
        if delta.content:
            timer.content_arrived()
            self.text.append(delta.content)
            if on_text is not None:
                on_text(delta.content)
        for tc in delta.tool_calls or []:
            timer.content_arrived()
            parts = self.calls.setdefault(tc.index, _ToolCallParts())
            # Ids and names arrive whole in the first fragment; some servers repeat them in later
            # fragments, which must not be appended.
            if tc.id and not parts.id:
                parts.id = tc.id
            if tc.function is not None:
                if tc.function.name and not parts.name:
                    parts.name = tc.function.name
                if tc.function.arguments:
                    parts.arguments.append(tc.function.arguments)

    def message(self) -> AssistantMessage | None:
        content: list[Any] = []
        thinking = "".join(self.reasoning)
        if thinking:
            content.append(ThinkingBlock(thinking=thinking, native=NativeBlock(api=API, raw=json.dumps(thinking))))
        joined = "".join(self.text)
        if joined:
            content.append(TextBlock(text=joined))
        for index in sorted(self.calls):
            parts = self.calls[index]
            if not parts.id or not parts.name:
                raise CallError(f"streamed tool call #{index} has no id or name", kind="bad_response")
            arguments = "".join(parts.arguments)
            raw = json.dumps(
                {"id": parts.id, "type": "function", "function": {"name": parts.name, "arguments": arguments}},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            content.append(
                ToolCallBlock(call_id=parts.id, name=parts.name, arguments=arguments, native=NativeBlock(api=API, raw=raw))
            )
        return AssistantMessage(content=tuple(content)) if content else None


def write_ttl_of(prompt: Prompt) -> str:
    """The TTL class writes of `prompt` are booked under when usage does not split them: the
    Anthropic family's longest planned mark (Anthropic writes the 1h entries first), else the
    family's own (GPT-5.6 explicit breakpoints: 30m)."""
    ttls = {mark.ttl for mark in prompt.breakpoints}
    if prompt.family == "anthropic":
        return "1h" if "1h" in ttls else "5m"
    return "30m"


class OpenAIChatBackend(OpenAIClientBackend):
    """One model behind a Chat Completions endpoint."""

    wire = "openai_chat"
    label_format = "openai-compat/{model}@{base_url}"

    def call(self, prompt: Prompt, *, max_tokens: int, on_text: TextSink | None = None) -> CallResult:
        report = RenderReport()
        body = render_chat_request(prompt, self.quirks, max_tokens=max_tokens, report=report)
        self.last_report = report
        request = dict(body, stream=True)
        if self.quirks.stream_usage:
            # Without this a stream carries no usage at all.
            request["stream_options"] = {"include_usage": True}
        raw_usage: dict[str, Any] = {}
        timings: dict[str, Any] | None = None
        reply = _Reply()
        finish: str | None = None
        model = prompt.model
        response_id: str | None = None
        with StreamedCall(self._inflight, self.label, openai.OpenAIError, request_id_header="x-request-id") as call:
            for chunk in call.events(self._client.chat.completions.create(**request)):
                response_id = response_id or chunk.id
                model = chunk.model or model
                extra = chunk.model_extra or {}
                if chunk.usage is not None:
                    raw_usage = normalize.as_raw_usage(chunk.usage)
                if isinstance(extra.get("timings"), dict):
                    timings = extra["timings"]  # llama.cpp: cache_n / prompt_n
                for choice in chunk.choices:
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    if choice.delta is not None:
                        reply.add(choice.delta, call.timer, on_text)
        # The store never raises on a usage payload: contradictions come back flagged in the usage.
        usage = normalize_usage(raw_usage, self.quirks, model, timings, prices=self.prices, write_ttl=write_ttl_of(prompt))
        if timings is not None:
            raw_usage = dict(raw_usage, timings=timings)
        return call.result(
            assistant=reply.message(),
            usage=usage,
            raw_usage=raw_usage,
            stop_reason=map_stop_reason(finish),
            raw_stop_reason=finish,
            model=model,
            response_id=response_id,
            request_body=request,
        )
