"""Anthropic Messages API: Prompt -> request body, streamed call through the official SDK -> CallResult.

Rendering follows the projection's layout one to one: tools -> system (system text, then project
docs, as two text blocks) -> messages. A `cache_control` mark goes exactly on the blocks the
projection's breakpoints name, with their TTL, and nowhere else. Everything is rendered from the
Prompt alone, so the same Prompt gives the same body bytes every time.

Assistant content is re-sent as received: a block that carries the Anthropic JSON it arrived in
(`NativeBlock` with api "anthropic") is sent from that JSON, key order included; `tool_use.input`
is parsed from the exact argument text the model streamed. This also serves the bundled engine
server (`local/...` models), which speaks this API so that cache marks can pin prefixes and the
usage it reports is exact.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from hitrate.harness.wire.anthropic_compaction import COMPACTION_BLOCK, betas_for, compaction_block
from hitrate.harness.wire.effort import Effort, wire_effort
from hitrate.harness.wire.stream import StreamedCall
from hitrate.harness.wire.types import (
    BlockKey,
    CallError,
    CallResult,
    InFlight,
    PlannedMarks,
    RenderReport,
    TextSink,
    map_stop_reason,
    native_raw,
)
from hitrate.projection.prompt import Breakpoint, Prompt
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
from hitrate.store.normalize import anthropic_stream_usage, as_raw_usage, from_anthropic

API = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"


def _cache_control(mark: Breakpoint) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": mark.ttl}


def _tool_input(call: ToolCallBlock) -> Any:
    """`tool_use.input` from the exact argument text. Arguments that are not a JSON object (a model
    of another provider can emit anything) are wrapped so the request stays valid and deterministic."""
    text = call.arguments
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {"_unparsed_arguments": text}
    return value if isinstance(value, dict) else {"_arguments": value}


def _user_block(block: Any) -> dict[str, Any] | None:
    if isinstance(block, ToolResultBlock):
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.call_id}
        if block.content:
            out["content"] = block.content
        if block.is_error:
            out["is_error"] = True
        return out
    if isinstance(block, ContextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, TextBlock):
        # The API refuses empty text blocks; the projection never marks them.
        return {"type": "text", "text": block.text} if block.text else None
    raise TypeError(f"unexpected user block {type(block).__name__}")


def _assistant_block(block: Any) -> dict[str, Any] | None:
    raw = native_raw(block, API)
    if raw is not None:
        return json.loads(raw)
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ToolCallBlock):
        return {"type": "tool_use", "id": block.call_id, "name": block.name, "input": _tool_input(block)}
    if isinstance(block, ThinkingBlock):
        # Thinking is only accepted back with Anthropic's own signature; reasoning from another
        # provider (or unsigned) cannot be replayed here and is left out, the same way every time.
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.thinking}
        if block.signature:
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        return None
    raise TypeError(f"unexpected assistant block {type(block).__name__}")


def render_messages_request(
    prompt: Prompt, *, max_tokens: int, report: RenderReport | None = None, effort: Effort | None = None,
    effort_dialect: str = "anthropic",
) -> dict[str, Any]:
    """The Messages API body for `prompt` (without `stream`). `effort` goes out as
    `output_config.effort` (see `wire.effort`); None leaves the model's default."""
    marks = PlannedMarks(prompt, report if report is not None else RenderReport())

    def mark(target: dict[str, Any], key: BlockKey) -> None:
        found = marks.take(key)
        if found is not None:
            target["cache_control"] = _cache_control(found)

    tools: list[dict[str, Any]] = []
    for i, spec in enumerate(prompt.tools):
        tool: dict[str, Any] = {"name": spec.name}
        if spec.description:
            tool["description"] = spec.description
        tool["input_schema"] = spec.input_schema
        mark(tool, ("tools", None, i))
        tools.append(tool)

    system: list[dict[str, Any]] = []
    for kind, text in (("system", prompt.system), ("docs", prompt.docs)):
        if text:
            block = {"type": "text", "text": text}
            mark(block, (kind, None, 0))
            system.append(block)

    messages: list[dict[str, Any]] = []
    for mi, message in enumerate(prompt.messages):
        content: list[dict[str, Any]] = []
        render = _user_block if isinstance(message, UserMessage) else _assistant_block
        for bi, block in enumerate(message.content):
            rendered = render(block)
            if rendered is None:
                continue
            mark(rendered, ("message", mi, bi))
            content.append(rendered)
        if not content:
            # An assistant turn made only of unreplayable thinking; keep roles alternating.
            content.append({"type": "text", "text": "(no content)"})
        messages.append({"role": message.role, "content": content})
    marks.finish()

    body: dict[str, Any] = {"model": prompt.model, "max_tokens": max_tokens}
    if tools:
        body["tools"] = tools
    if system:
        body["system"] = system
    body["messages"] = messages
    value = wire_effort(effort_dialect, effort)
    if value is not None:
        # Effort bounds thinking, text and tool calls together; Claude 5-family models think
        # adaptively by default, so no `thinking` field is needed (and manual budgets are refused).
        body["output_config"] = {"effort": value}
    return body


# ------------------------------------------------------------------------------------------------
# Streaming call
# ------------------------------------------------------------------------------------------------


class _Collected:
    """Blocks of one streamed reply, assembled from content_block_* events."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}

    def start(self, index: int, block: dict[str, Any]) -> None:
        entry = dict(block)
        entry["_text"] = [block.get("text") or block.get("thinking") or ""]
        entry["_json"] = []
        entry["_signature"] = [block.get("signature") or ""]
        entry["_compaction"] = []
        self.blocks[index] = entry

    def delta(self, index: int, delta: dict[str, Any]) -> str | None:
        entry = self.blocks.get(index)
        if entry is None:
            raise CallError(f"stream delta for unknown content block {index}", kind="bad_response")
        kind = delta.get("type")
        if kind == "text_delta":
            entry["_text"].append(delta.get("text", ""))
            return delta.get("text", "")
        if kind == "input_json_delta":
            entry["_json"].append(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            entry["_text"].append(delta.get("thinking", ""))
        elif kind == "signature_delta":
            entry["_signature"].append(delta.get("signature", ""))
        elif kind == "compaction_delta":
            entry["_compaction"].append(delta)
        return None

    def message(self) -> AssistantMessage | None:
        content: list[Any] = []
        for index in sorted(self.blocks):
            entry = self.blocks[index]
            kind = entry.get("type")
            if kind == "text":
                text = "".join(entry["_text"])
                if text:
                    content.append(TextBlock(text=text))
            elif kind == "tool_use":
                arguments = "".join(entry["_json"])
                if not arguments.strip():
                    arguments = json.dumps(entry.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
                raw = (
                    '{"type":"tool_use","id":'
                    + json.dumps(entry["id"], ensure_ascii=False)
                    + ',"name":'
                    + json.dumps(entry["name"], ensure_ascii=False)
                    + ',"input":'
                    + arguments
                    + "}"
                )
                try:
                    json.loads(raw)
                except json.JSONDecodeError:
                    raw = None  # malformed input text: re-send through the structured fallback
                content.append(
                    ToolCallBlock(
                        call_id=entry["id"],
                        name=entry["name"],
                        arguments=arguments,
                        native=NativeBlock(api=API, raw=raw) if raw else None,
                    )
                )
            elif kind == "thinking":
                signature = "".join(entry["_signature"]) or None
                content.append(ThinkingBlock(thinking="".join(entry["_text"]), signature=signature))
            elif kind == "redacted_thinking":
                content.append(ThinkingBlock(thinking=entry.get("data", ""), redacted=True))
            elif kind == COMPACTION_BLOCK:
                content.append(compaction_block(entry))
            elif kind:
                # A block this harness does not read (server_tool_use, web_search_tool_result, ...):
                # kept whole, as an empty text block carrying its JSON, so it goes back to this API
                # exactly (a paused turn is continued by sending it back as it is) and nowhere else.
                block = {k: v for k, v in entry.items() if not k.startswith("_")}
                if entry["_json"]:
                    try:
                        block["input"] = json.loads("".join(entry["_json"]))
                    except json.JSONDecodeError:
                        pass
                raw = json.dumps(block, ensure_ascii=False, separators=(",", ":"))
                content.append(TextBlock(text="", native=NativeBlock(api=API, raw=raw)))
        return AssistantMessage(content=tuple(content)) if content else None


def _dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    return obj.to_dict(mode="json")


class _PrewarmRefused(Exception):
    """The server refused a `max_tokens: 0` pre-warm."""


class AnthropicBackend:
    """One model behind an Anthropic Messages endpoint (Anthropic itself, or the bundled engine)."""

    wire = "anthropic_messages"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        label: str | None = None,
        timeout_s: float = 600.0,
        extra_headers: dict[str, str] | None = None,
        effort_dialect: str = "anthropic",
        client: Any | None = None,
    ) -> None:
        """`client`: an SDK client built elsewhere that speaks this API under another transport
        (`AnthropicBedrock`, `AnthropicVertex`: `hitrate.harness.route_clients`), made with
        `max_retries=0`; None builds `anthropic.Anthropic` from the key and base URL."""
        self.model = model
        self.effort: Effort | None = None
        self.effort_dialect = effort_dialect
        """"anthropic", or "none" for a server whose models do not reason (the bundled engine)."""
        self.label = label or f"anthropic/{model}"
        self.base_url = base_url or DEFAULT_BASE_URL
        # Retries are ours (hitrate.harness.retry): the SDK's would hide attempts from the ledger.
        self._client = client if client is not None else anthropic.Anthropic(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout_s,
            default_headers=extra_headers or None,
        )
        self.last_report: RenderReport | None = None
        self._inflight = InFlight()
        self.context_management: dict[str, Any] | None = None
        """Server-side context management to ask for on every call (`anthropic_compaction`);
        None: none, and the plain (non-beta) Messages endpoint."""
        self.prewarm_refused = False
        """Set for good once the server refused a `max_tokens: 0` pre-warm (`prewarm` then streams
        one token instead)."""

    def close(self) -> None:
        self._client.close()

    def abort(self) -> None:
        """Stop the calls open now (another thread's user pressed cancel)."""
        self._inflight.abort()

    def _render(self, prompt: Prompt, max_tokens: int, report: RenderReport) -> dict[str, Any]:
        # A pre-warm carries the same effort as the calls it keeps warm: thinking settings are part
        # of what a cached message prefix was written under.
        return render_messages_request(
            prompt, max_tokens=max_tokens, report=report, effort=self.effort, effort_dialect=self.effort_dialect
        )

    def prewarm(self, prompt: Prompt) -> CallResult:
        """Read (and so refresh) or write the cache entries of `prompt` without generating: the body
        `call` would send, with `max_tokens: 0`, which runs the prefill, writes the cache and returns
        empty content. The API refuses a zero budget on a stream, so this call does not stream.

        A server that refuses it (an Anthropic-compatible gateway that wants max_tokens >= 1) gets
        one streamed token instead, from then on. Any 400 counts as that refusal: the same body with
        a real budget was accepted when the request was first sent."""
        if self.prewarm_refused:
            return self.call(prompt, max_tokens=1)
        report = RenderReport()
        body = self._render(prompt, 0, report)
        self.last_report = report
        where = f"{self.label} at {self.base_url}"

        def refine(exc: BaseException) -> None:
            # Any 400 counts as the refusal: the same body with a real budget was accepted before.
            if isinstance(exc, anthropic.BadRequestError):
                raise _PrewarmRefused() from exc

        try:
            with StreamedCall(self._inflight, where, anthropic.AnthropicError, request_id_header="request-id", refine=refine) as call:
                message = self._client.messages.create(**body, **call.timeout)
                call.check()
        except _PrewarmRefused:
            self.prewarm_refused = True
            return self.call(prompt, max_tokens=1)
        # A surprising usage block never fails the call: the store reads it as well as it can
        # and flags what it could not reconcile.
        raw_usage = as_raw_usage(getattr(message, "usage", None))
        call.request_id = getattr(message, "_request_id", None)
        usage = from_anthropic(raw_usage)
        return call.result(
            assistant=None,
            usage=usage,
            raw_usage=raw_usage,
            stop_reason=map_stop_reason(message.stop_reason),
            raw_stop_reason=message.stop_reason,
            model=message.model or prompt.model,
            response_id=message.id,
            request_body=body,
            streamed=False,
        )

    def _open_stream(self, body: dict[str, Any], timeout: dict[str, Any]) -> Any:
        # Server-side compaction is a beta: the beta endpoint knows its fields and block types.
        if "context_management" in body:
            return self._client.beta.messages.create(
                **body, betas=betas_for(body["context_management"]), stream=True, **timeout
            )
        return self._client.messages.create(**body, stream=True, **timeout)

    def call(self, prompt: Prompt, *, max_tokens: int, on_text: TextSink | None = None) -> CallResult:
        report = RenderReport()
        body = self._render(prompt, max_tokens, report)
        self.last_report = report
        where = f"{self.label} at {self.base_url}"
        start_usage: dict[str, Any] = {}
        delta_usage: dict[str, Any] = {}
        stop_raw: str | None = None
        model = prompt.model
        response_id: str | None = None
        stop_details: dict[str, Any] | None = None
        collected = _Collected()
        if self.context_management is not None:
            body["context_management"] = self.context_management
        # Anthropic's stream ends with `message_stop` (streaming docs): without it the reply is not whole.
        with StreamedCall(self._inflight, where, anthropic.AnthropicError, request_id_header="request-id",
                          last_event="message_stop") as call:
            for event in call.events(self._open_stream(body, call.timeout)):
                kind = event.type
                if kind == "message_start":
                    message = event.message
                    start_usage = as_raw_usage(getattr(message, "usage", None))
                    call.partial_usage = start_usage
                    model = message.model or model
                    response_id = message.id
                elif kind == "content_block_start":
                    call.timer.content_arrived()
                    collected.start(event.index, _dict(event.content_block))
                elif kind == "content_block_delta":
                    call.timer.content_arrived()
                    text = collected.delta(event.index, _dict(event.delta))
                    if text and on_text is not None:
                        on_text(text)
                elif kind == "message_delta":
                    stop_raw = event.delta.stop_reason or stop_raw
                    delta_usage = as_raw_usage(getattr(event, "usage", None))
                    call.partial_usage = {**start_usage, **delta_usage}
                    # A refusal says why in `stop_details` (category, explanation) on this event.
                    details = _dict(event.delta).get("stop_details")
                    stop_details = details if isinstance(details, dict) else stop_details
                elif kind == "message_stop":
                    call.end()
        # Cumulative message_delta counts win; whatever the counts say, the call is kept (flagged).
        raw_usage, usage = anthropic_stream_usage(start_usage, delta_usage)
        return call.result(
            assistant=collected.message(),
            usage=usage,
            raw_usage=raw_usage,
            stop_reason=map_stop_reason(stop_raw),
            raw_stop_reason=stop_raw,
            model=model,
            response_id=response_id,
            request_body=body,
            stop_details=stop_details,
        )
