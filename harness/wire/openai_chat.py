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

Opaque fields go back as they came: a tool call keeps every field beyond id / type / function
(Gemini 3's `extra_content.google.thought_signature`, required on the next request), and an
assistant turn's reasoning goes back in the fields it arrived in (`reasoning_content`, `reasoning`,
OpenRouter's `reasoning_details`), to the kind of server that produced it.

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
from hitrate.harness.wire.effort import Effort, chat_effort_fields
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

    def __init__(self, prompt: Prompt, marks: PlannedMarks, quirks: Quirks) -> None:
        super().__init__(prompt, marks)
        self.prompt = prompt
        self.quirks = quirks

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
        reasoning: dict[str, Any] = {}
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
            elif isinstance(block, ThinkingBlock):
                # Reasoning goes back only to the kind of server that produced it, in the fields it
                # came in (`reasoning_fields`).
                raw = native_raw(block, API)
                if raw is not None:
                    for name, value in reasoning_fields(raw).items():
                        if isinstance(value, str) and isinstance(reasoning.get(name), str):
                            reasoning[name] += value
                        else:
                            reasoning[name] = value
        out: dict[str, Any] = {"role": "assistant", "content": self.content(texts) if texts else None}
        if calls and self.quirks.reasoning_on_tool_turns:
            # DeepSeek's thinking mode refuses a tool-calling turn without its reasoning (400), even
            # when there was none to give: an empty string stands for it.
            reasoning.setdefault("reasoning_content", "")
        out.update(reasoning)
        if calls:
            out["tool_calls"] = calls
        return out


def reasoning_fields(raw: str) -> dict[str, Any]:
    """The assistant-message fields a stored Chat reasoning block re-sends: `reasoning_content`
    (DeepSeek, vLLM, SGLang), `reasoning` (OpenRouter, newer vLLM), `reasoning_details` (OpenRouter's
    structured reasoning, signatures and encrypted blocks, to be passed back unchanged),
    `extra_content` (Gemini's thought signature on a reply without tool calls). An older stored
    block is a bare JSON string: DeepSeek's `reasoning_content`."""
    value = json.loads(raw)
    if isinstance(value, str):
        return {"reasoning_content": value}
    return dict(value) if isinstance(value, dict) else {}


def render_chat_request(
    prompt: Prompt, quirks: Quirks, *, max_tokens: int, report: RenderReport | None = None, effort: Effort | None = None
) -> dict[str, Any]:
    """The Chat Completions body for `prompt` (without `stream` / `stream_options`). `effort` goes
    out in the field the backend's dialect names (`wire.effort`); None leaves the model's default."""
    marks = PlannedMarks(prompt, report if report is not None else RenderReport())
    r = _Renderer(prompt, marks, quirks)
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
    body.update(chat_effort_fields(quirks.effort_dialect, effort))
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
        self.extra: dict[str, Any] = {}
        """Fields of the call beyond id / type / function, kept to be sent back: Gemini 3's
        `extra_content.google.thought_signature` (ai.google.dev/gemini-api/docs/thought-signatures,
        OpenAI compatibility: without it the next request is refused with a 4xx)."""


REASONING_TEXT_FIELDS = ("reasoning_content", "reasoning")
"""Where Chat servers stream readable reasoning: `reasoning_content` (DeepSeek, vLLM, SGLang),
`reasoning` (OpenRouter, newer vLLM). Both are read; each goes back under its own name."""


def merge_reasoning_details(details: list[dict[str, Any]], piece: Any) -> None:
    """Add one streamed `reasoning_details` fragment list to `details` (OpenRouter: entries carry
    an `index`; the text of one entry arrives in pieces, its `signature` / `data` once). Entries
    without an index are kept as they came."""
    for entry in piece if isinstance(piece, list) else []:
        if not isinstance(entry, dict):
            continue
        index = entry.get("index")
        same = next((d for d in details if index is not None and d.get("index") == index and d.get("type") == entry.get("type")), None)
        if same is None:
            details.append(dict(entry))
            continue
        for key, value in entry.items():
            if key in ("text", "summary", "data") and isinstance(value, str) and isinstance(same.get(key), str):
                same[key] += value
            elif value is not None:
                same[key] = value


class _Reply:
    """Reasoning, text and tool calls of one streamed reply, assembled from choice deltas."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: dict[str, list[str]] = {}
        self.reasoning_details: list[dict[str, Any]] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _ToolCallParts] = {}
        self.extra_content: Any = None
        """Gemini 3: the message's own `extra_content` (a thought signature on a text reply), which
        Google asks to be sent back as received."""

    def add(self, delta: Any, timer: StreamTimer, on_text: TextSink | None) -> None:
        extra = delta.model_extra or {}
        for name in REASONING_TEXT_FIELDS:
            piece = extra.get(name)
            if isinstance(piece, str) and piece:
                timer.content_arrived()
                self.reasoning.setdefault(name, []).append(piece)
        if extra.get("extra_content") is not None:
            self.extra_content = extra["extra_content"]
        if extra.get("reasoning_details"):
            timer.content_arrived()
            merge_reasoning_details(self.reasoning_details, extra["reasoning_details"])
        refusal = getattr(delta, "refusal", None)
        if refusal:
            # OpenAI: the model declined; the text says why (structured outputs, safety).
            timer.content_arrived()
            self.refusal.append(refusal)
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
            for key, value in (tc.model_extra or {}).items():
                if value is not None:
                    parts.extra[key] = value

    def message(self) -> AssistantMessage | None:
        content: list[Any] = []
        fields: dict[str, Any] = {name: "".join(pieces) for name, pieces in self.reasoning.items()}
        if self.reasoning_details:
            fields["reasoning_details"] = self.reasoning_details
        if self.extra_content is not None:
            fields["extra_content"] = self.extra_content
        if fields:
            thinking = "".join(v for k, v in fields.items() if k in REASONING_TEXT_FIELDS) or _details_text(self.reasoning_details)
            raw = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
            content.append(ThinkingBlock(thinking=thinking, native=NativeBlock(api=API, raw=raw)))
        joined = "".join(self.text) or "".join(self.refusal)
        if joined:
            content.append(TextBlock(text=joined))
        for index in sorted(self.calls):
            parts = self.calls[index]
            if not parts.id or not parts.name:
                raise CallError(f"streamed tool call #{index} has no id or name", kind="bad_response")
            arguments = "".join(parts.arguments)
            call: dict[str, Any] = {"id": parts.id, "type": "function", "function": {"name": parts.name, "arguments": arguments}}
            call.update({k: v for k, v in parts.extra.items() if k not in call})
            raw = json.dumps(call, ensure_ascii=False, separators=(",", ":"))
            content.append(
                ToolCallBlock(call_id=parts.id, name=parts.name, arguments=arguments, native=NativeBlock(api=API, raw=raw))
            )
        return AssistantMessage(content=tuple(content)) if content else None


def _details_text(details: list[dict[str, Any]]) -> str:
    """The readable part of `reasoning_details` (text and summaries; encrypted entries have none)."""
    return "".join(str(d.get("text") or d.get("summary") or "") for d in details)


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
        body = render_chat_request(prompt, self.quirks, max_tokens=max_tokens, report=report, effort=self.effort)
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
        # A whole Chat Completions stream gives each choice a `finish_reason` (then, when asked, a
        # usage chunk, then `[DONE]`, which the SDK consumes). A stream that closes before any
        # finish_reason was cut off mid-answer.
        with StreamedCall(self._inflight, self.label, openai.OpenAIError, request_id_header="x-request-id",
                          last_event="a finish_reason") as call:
            for chunk in call.events(self._client.chat.completions.create(**request, **call.timeout)):
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
                        call.end()
                    if choice.delta is not None:
                        reply.add(choice.delta, call.timer, on_text)
        # The store never raises on a usage payload: contradictions come back flagged in the usage.
        usage = normalize_usage(raw_usage, self.quirks, model, timings, prices=self.prices, write_ttl=write_ttl_of(prompt))
        if timings is not None:
            raw_usage = dict(raw_usage, timings=timings)
        # A refusal ends the stream with finish_reason "stop": it is the refusal field that says so.
        stop = "refusal" if reply.refusal and not reply.text else map_stop_reason(finish)
        details = {"type": "refusal", "explanation": "".join(reply.refusal)} if stop == "refusal" and reply.refusal else None
        return call.result(
            assistant=reply.message(),
            usage=usage,
            raw_usage=raw_usage,
            stop_reason=stop,
            raw_stop_reason="refusal" if details else finish,
            model=model,
            response_id=response_id,
            request_body=request,
            stop_details=details,
        )
