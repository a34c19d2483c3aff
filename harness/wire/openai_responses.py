"""OpenAI Responses API: Prompt -> request body, streamed call through the official SDK -> CallResult.

Stateless, the way Codex talks to the API for zero-data-retention organisations: `store=False` and
no `previous_response_id`, so every request carries the whole conversation and the previous
request's input is an exact prefix of the next one's. Reasoning survives between requests only as
the `encrypted_content` the server returns when asked (`include=["reasoning.encrypted_content"]`),
re-sent verbatim.

Layout on this wire:
- `tools`: function tools in the Prompt's order (sorted by name).
- `instructions`: the system text, then the project docs, joined by a blank line. It is a plain
  string and cannot carry a cache mark: a mark planned on the static head is reported unplaced.
- `input`: the transcript as items. A user turn becomes one `function_call_output` item per tool
  result, then one user `message` with its text and frozen context blocks. An assistant turn becomes
  its items in the order the model produced them: `reasoning`, assistant `message`, `function_call`
  (with `arguments` the exact string the model streamed).

Item ids (`rs_...`, `msg_...`, `fc_...`) are never sent: with `store=False` the server keeps nothing
an id could refer to, so items always travel whole.

Cache marks: GPT-5.6+ accepts `prompt_cache_breakpoint` on input content parts (`input_text` in
user messages and in tool outputs). When the projection planned marks for that family, user
messages and tool outputs are rendered as content-part lists (so adding or moving a mark never
changes how an item is spelled, only the mark itself); otherwise as plain strings. Assistant text,
function calls and reasoning items cannot carry a mark on this wire.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx2
import openai

from hitrate.harness.models import Quirks
from hitrate.harness.wire.effort import Effort, wire_effort
from hitrate.harness.wire.openai_client import OpenAIClientBackend
from hitrate.harness.wire.responses_compaction import COMPACTION_ITEM, compaction_item_block
from hitrate.harness.wire.stream import StreamedCall
from hitrate.harness.wire.types import (
    BlockKey,
    CallError,
    CallResult,
    OpenAIContent,
    PlannedMarks,
    RenderReport,
    StopReason,
    TextSink,
    context_rides_with_tool_results,
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

API = "openai_responses"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
ReasoningSummary = Literal["auto", "concise", "detailed"]
# Text pieces of one user turn (and system + docs in `instructions`) are joined with a blank line
# when rendered as one string.
_JOIN = "\n\n"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def assistant_text_item(parts: list[dict[str, Any]], phase: str | None = None) -> dict[str, Any]:
    """An assistant `message` input item. Its content parts are `output_text` / `refusal`: the API
    refuses `input_text` in an assistant message."""
    item: dict[str, Any] = {"type": "message", "role": "assistant", "content": parts}
    if phase:
        # Newer Codex-line models label assistant messages commentary / final_answer and want the
        # label back on every later request.
        item["phase"] = phase
    return item


def function_call_item(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


class _Renderer(OpenAIContent):
    part_type = "input_text"
    join = _JOIN

    def user(self, mi: int, message: UserMessage) -> list[dict[str, Any]]:
        results: list[tuple[str, list[tuple[str, BlockKey]]]] = []
        pieces: list[tuple[str, BlockKey]] = []
        # Context of a turn of tool results only goes at the end of its last output: no user
        # message between tool rounds (GPT-5.6 scopes reasoning by user turns).
        ride = context_rides_with_tool_results(message)
        for bi, block in enumerate(message.content):
            key = ("message", mi, bi)
            if isinstance(block, ToolResultBlock):
                results.append((block.call_id, [(block.content, key)]))
            elif isinstance(block, ContextBlock) and block.text and ride and results:
                results[-1][1].append((block.text, key))
            elif isinstance(block, (TextBlock, ContextBlock)) and block.text:
                pieces.append((block.text, key))
        # The wire has no error flag for a tool output; a failed tool says so in its text.
        items: list[dict[str, Any]] = [
            {"type": "function_call_output", "call_id": call_id, "output": self.content(parts)} for call_id, parts in results
        ]
        if pieces:
            items.append({"type": "message", "role": "user", "content": self.content(pieces)})
        return items

    def assistant(self, message: AssistantMessage) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for block in message.content:
            raw = native_raw(block, API)
            if raw is not None:
                item = json.loads(raw)
                if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
                    item["arguments"] = sendable_arguments(item["arguments"])
                items.append(item)
            elif isinstance(block, TextBlock) and block.text:
                items.append(assistant_text_item([{"type": "output_text", "text": block.text}]))
            elif isinstance(block, ToolCallBlock):
                items.append(function_call_item(block.call_id, block.name, sendable_arguments(block.arguments)))
            # Reasoning from another API, or without encrypted content, cannot be replayed here
            # (with store=False nothing on the server stands for it): left out, the same way every time.
        return items


def render_responses_request(
    prompt: Prompt,
    quirks: Quirks,
    *,
    max_output_tokens: int,
    include_encrypted_reasoning: bool = True,
    report: RenderReport | None = None,
    effort: Effort | None = None,
    reasoning_summary: ReasoningSummary | None = "auto",
) -> dict[str, Any]:
    """The Responses body for `prompt` (without `stream`). With `effort`, a `reasoning` object asks
    for it (OpenAI's values, `wire.effort`) and for a reasoning summary of `reasoning_summary`."""
    marks = PlannedMarks(prompt, report if report is not None else RenderReport())
    r = _Renderer(prompt, marks)
    items: list[dict[str, Any]] = []
    for mi, message in enumerate(prompt.messages):
        if isinstance(message, UserMessage):
            items.extend(r.user(mi, message))
        else:
            items.extend(r.assistant(message))
    marks.finish()

    body: dict[str, Any] = {"model": prompt.model}
    instructions = _JOIN.join(text for text in (prompt.system, prompt.docs) if text)
    if instructions:
        body["instructions"] = instructions
    if prompt.tools:
        tools: list[dict[str, Any]] = []
        for spec in prompt.tools:
            tool: dict[str, Any] = {"type": "function", "name": spec.name}
            if spec.description:
                tool["description"] = spec.description
            tool["parameters"] = spec.input_schema
            # Strict mode wants every property required and additionalProperties false; the tools'
            # schemas have optional arguments, so it is turned off explicitly.
            tool["strict"] = False
            tools.append(tool)
        body["tools"] = tools
    body["input"] = items
    body["max_output_tokens"] = max_output_tokens
    # `reasoning.effort` is OpenAI's own field, with OpenAI's values, on every server of this API.
    value = wire_effort("openai", effort)
    if value is not None:
        reasoning: dict[str, str] = {"effort": value}
        if reasoning_summary:
            # Summaries are the only readable reasoning this API returns; the encrypted item is what
            # carries the reasoning itself to the next request.
            reasoning["summary"] = reasoning_summary
        body["reasoning"] = reasoning
    # Stateless: nothing is kept server-side, so no request may depend on an earlier one by id.
    body["store"] = False
    if include_encrypted_reasoning:
        body["include"] = [ENCRYPTED_REASONING]
    if quirks.send_prompt_cache_key and prompt.prompt_cache_key:
        # OpenAI routes requests to cache machines by a hash of the prefix plus this key; one key per
        # session keeps a session's requests on the machines that hold its prefix.
        body["prompt_cache_key"] = prompt.prompt_cache_key
    return body


# ------------------------------------------------------------------------------------------------
# Usage and stop reason
# ------------------------------------------------------------------------------------------------


def normalize_usage(
    raw: dict[str, Any], model: str, requested_model: str | None = None, *, prices: PriceTable | None = None
) -> Usage:
    """Normalized usage for a Responses `usage` payload. Whether cache writes are billed (GPT-5.6+)
    comes from the price table entry of the answering model (else the requested one)."""
    if not raw:
        return Usage()  # the server sent no usage: every bucket unknown
    table = prices or PriceTable.default()
    entry = table.find(model) or (table.find(requested_model) if requested_model else None)
    if entry is not None:
        writes_billed = entry.writes_billed
    else:
        # A model the price table does not know: trust the payload about billed writes.
        details = raw.get("input_tokens_details")
        writes_billed = isinstance(details, dict) and bool(details.get("cache_write_tokens"))
    return normalize.from_openai_responses(raw, writes_billed=writes_billed)


def responses_stop_reason(status: str | None, incomplete_reason: str | None, has_tool_calls: bool) -> StopReason:
    """The Responses API has no finish reason: a completed response with function calls is a tool
    turn; an incomplete one says why in `incomplete_details.reason`."""
    if status == "completed":
        return "tool_use" if has_tool_calls else "end_turn"
    if status == "incomplete":
        return {"max_output_tokens": "max_tokens", "content_filter": "refusal"}.get(incomplete_reason or "", "other")
    return "other"


# ------------------------------------------------------------------------------------------------
# Streaming call
# ------------------------------------------------------------------------------------------------


def _dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    return obj.to_dict(mode="json")


class _Output:
    """Output items of one streamed response, by output index: the finished item from
    `response.output_item.done` when it came, else the started item plus its deltas."""

    def __init__(self) -> None:
        self.added: dict[int, dict[str, Any]] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.text: dict[int, list[str]] = {}
        self.arguments: dict[int, list[str]] = {}

    def items(self, final_output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        indices = sorted(set(self.added) | set(self.done))
        if not indices:
            return list(final_output)
        out: list[dict[str, Any]] = []
        for index in indices:
            item = self.done.get(index)
            if item is None and index < len(final_output):
                item = final_output[index]
            out.append(item if item is not None else self._rebuilt(index))
        return out

    def _rebuilt(self, index: int) -> dict[str, Any]:
        item = dict(self.added[index])
        kind = item.get("type")
        if kind == "function_call":
            item["arguments"] = "".join(self.arguments.get(index, []))
        elif kind == "message":
            item["content"] = [{"type": "output_text", "text": "".join(self.text.get(index, []))}]
        elif kind == "reasoning":
            # The docs warn that the encrypted content of an unfinished item may be incomplete.
            item["encrypted_content"] = None
        return item


def _blocks(item: dict[str, Any]) -> list[Any]:
    """Transcript blocks for one output item, each carrying the exact item to re-send."""
    kind = item.get("type")
    if kind == "message":
        parts: list[dict[str, Any]] = []
        texts: list[str] = []
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                parts.append({"type": "output_text", "text": part.get("text") or ""})
                texts.append(part.get("text") or "")
            elif part.get("type") == "refusal":
                parts.append({"type": "refusal", "refusal": part.get("refusal") or ""})
                texts.append(part.get("refusal") or "")
        text = "".join(texts)
        if not text:
            return []
        raw = _compact(assistant_text_item(parts, item.get("phase")))
        return [TextBlock(text=text, native=NativeBlock(api=API, raw=raw))]
    if kind == "function_call":
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        if not call_id or not name:
            raise CallError(f"streamed function_call has no call_id or name: {_compact(item)[:200]}", kind="bad_response")
        arguments = arguments if isinstance(arguments, str) else ""
        raw = _compact(function_call_item(call_id, name, arguments))
        return [ToolCallBlock(call_id=call_id, name=name, arguments=arguments, native=NativeBlock(api=API, raw=raw))]
    if kind == "reasoning":
        summary = [
            {"type": "summary_text", "text": s.get("text") or ""}
            for s in item.get("summary") or []
            if s.get("type") == "summary_text"
        ]
        thinking = _JOIN.join(s["text"] for s in summary)
        encrypted = item.get("encrypted_content")
        # The encrypted content lives only in the native item, not in `signature`: other adapters
        # must never mistake it for a signature of their own provider.
        native = (
            NativeBlock(api=API, raw=_compact({"type": "reasoning", "summary": summary, "encrypted_content": encrypted}))
            if encrypted
            else None
        )
        if not thinking and native is None:
            return []
        return [ThinkingBlock(thinking=thinking, native=native)]
    if kind == COMPACTION_ITEM:
        return [compaction_item_block(item)]
    return []  # hosted-tool items (web search, ...) are not requested by this harness


def _refused(item: dict[str, Any]) -> bool:
    """Whether an output message is a refusal: a `refusal` part and no text."""
    if item.get("type") != "message":
        return False
    kinds = {part.get("type") for part in item.get("content") or []}
    return "refusal" in kinds and "output_text" not in kinds


def _stream_failure(error: dict[str, Any], response: httpx2.Response) -> openai.APIStatusError:
    """An `error` event or a `response.failed` inside a stream that began with HTTP 200, as the SDK
    error the shared helpers read: the error code (`rate_limit_exceeded`, `server_error`, ...)
    decides whether it is worth retrying."""
    code = error.get("code") or error.get("type")
    message = error.get("message") or "the response failed"
    return openai.APIStatusError(str(message), response=response, body={"type": code, "message": message})


class _EncryptedReasoningRefused(Exception):
    pass


def _refuses_encrypted_reasoning(exc: BaseException) -> bool:
    if not isinstance(exc, openai.BadRequestError):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    body = body.get("error", body) if isinstance(body.get("error"), dict) else body
    message = str(body.get("message") or exc.message).lower()
    return body.get("param") == "include" or "encrypted content is not supported" in message


class OpenAIResponsesBackend(OpenAIClientBackend):
    """One model behind a Responses endpoint, called statelessly."""

    wire = "openai_responses"
    label_format = "openai-responses/{model}"

    def __init__(self, **backend: Any) -> None:
        super().__init__(**backend)
        self.include_encrypted_reasoning = True
        """Cleared for good once the model refuses the include (it does not reason)."""
        self.context_management: list[dict[str, Any]] | None = None
        """Server-side compaction to ask for on every call (`responses_compaction`); None: none."""
        self.reasoning_summary: ReasoningSummary | None = "auto"
        """The reasoning summary asked for along with an effort (`reasoning.summary`); None: none."""

    def call(self, prompt: Prompt, *, max_tokens: int, on_text: TextSink | None = None) -> CallResult:
        try:
            return self._attempt(prompt, max_tokens, on_text)
        except _EncryptedReasoningRefused:
            # Models that do not reason (gpt-4.1, gpt-4o) answer the include with a 400 ("Encrypted
            # content is not supported with this model") before anything is generated. They have no
            # reasoning to keep, so ask again without it, and from now on never send it.
            self.include_encrypted_reasoning = False
            return self._attempt(prompt, max_tokens, on_text)

    def _attempt(self, prompt: Prompt, max_tokens: int, on_text: TextSink | None) -> CallResult:
        report = RenderReport()
        include = self.include_encrypted_reasoning
        body = render_responses_request(
            prompt, self.quirks, max_output_tokens=max_tokens, include_encrypted_reasoning=include, report=report,
            effort=self.effort if include else None, reasoning_summary=self.reasoning_summary,
        )
        self.last_report = report
        if self.context_management is not None:
            body["context_management"] = self.context_management
        request = dict(body, stream=True)
        where = f"{self.label} at {self.base_url}"
        output = _Output()
        final: dict[str, Any] | None = None
        model = prompt.model
        response_id: str | None = None

        def refine(exc: BaseException) -> None:
            if include and _refuses_encrypted_reasoning(exc):
                raise _EncryptedReasoningRefused() from exc

        # A whole Responses stream ends with `response.completed` (or `response.incomplete`, a
        # reply cut at a limit, said so); `response.failed` and `error` say it failed.
        with StreamedCall(self._inflight, where, openai.OpenAIError, request_id_header="x-request-id", refine=refine,
                          last_event="response.completed") as call:
            stream = self._client.responses.create(**request, **call.timeout)
            for event in call.events(stream):
                kind = getattr(event, "type", None)
                timer = call.timer
                if kind in ("response.created", "response.in_progress"):
                    started = _dict(event.response)
                    response_id = started.get("id") or response_id
                    model = started.get("model") or model
                elif kind == "response.output_item.added":
                    timer.content_arrived()
                    output.added[event.output_index] = _dict(event.item)
                elif kind == "response.output_text.delta":
                    timer.content_arrived()
                    output.text.setdefault(event.output_index, []).append(event.delta)
                    if on_text is not None and event.delta:
                        on_text(event.delta)
                elif kind == "response.function_call_arguments.delta":
                    timer.content_arrived()
                    output.arguments.setdefault(event.output_index, []).append(event.delta)
                elif kind in ("response.reasoning_summary_text.delta", "response.refusal.delta"):
                    timer.content_arrived()
                elif kind == "response.output_item.done":
                    output.done[event.output_index] = _dict(event.item)
                elif kind in ("response.completed", "response.incomplete"):
                    final = _dict(event.response)
                    call.partial_usage = normalize.as_raw_usage(final.get("usage")) or None
                    call.end()
                elif kind == "response.failed":
                    final = _dict(event.response)
                    call.partial_usage = normalize.as_raw_usage(final.get("usage")) or None
                    raise _stream_failure(final.get("error") or {}, stream.response)
                elif kind == "error":
                    raise _stream_failure(_dict(event), stream.response)
        assert final is not None  # `events` refuses a stream without its last event
        model = final.get("model") or model
        response_id = final.get("id") or response_id
        # The store never raises on a usage payload: contradictions come back flagged in the usage.
        raw_usage = normalize.as_raw_usage(final.get("usage"))
        usage = normalize_usage(raw_usage, model, prompt.model, prices=self.prices)
        items = output.items(final.get("output") or [])
        blocks = [b for item in items for b in _blocks(item)]
        status = final.get("status")
        reason = (final.get("incomplete_details") or {}).get("reason")
        has_calls = any(isinstance(b, ToolCallBlock) for b in blocks)
        stop = responses_stop_reason(status, reason, has_calls)
        raw_stop = reason if status == "incomplete" and reason else status
        details: dict[str, Any] | None = None
        refusals = [part.get("refusal") or "" for item in items if _refused(item) for part in item.get("content") or []
                    if part.get("type") == "refusal"]
        if stop == "end_turn" and refusals:
            # A refusal is a completed response whose message holds a `refusal` part instead of text.
            stop, raw_stop, details = "refusal", "refusal", {"type": "refusal", "explanation": "".join(refusals)}
        return call.result(
            assistant=AssistantMessage(content=tuple(blocks)) if blocks else None,
            usage=usage,
            raw_usage=raw_usage,
            stop_reason=stop,
            raw_stop_reason=raw_stop,
            stop_details=details,
            model=model,
            response_id=response_id,
            request_body=request,
        )
