"""What every provider adapter returns, and the one seam the agent loop calls.

One module per wire API renders a wire-neutral `Prompt` into its own request format, streams the
reply, and hands back a `CallResult`: the assistant turn as a transcript message (content the model
produced kept exactly as received), the normalized `Usage`, the raw usage as the server sent it,
the stop reason and timings. A failed call raises `CallError`, which says whether trying again can
help; `hitrate.harness.retry` decides what to do with it. The pieces both adapters use while
rendering (placing the planned cache marks) and streaming (timing the reply) live here too.
"""

from __future__ import annotations

import json

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.wire.effort import Effort
from hitrate.projection.prompt import Breakpoint, Prompt
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolResultBlock
from hitrate.store.usage import Usage

TextSink = Callable[[str], None]
"""Receives each streamed text delta of the reply as it arrives."""

StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn", "context_window_exceeded", "other"
]
"""Why generation stopped, one vocabulary for every wire. `refusal`: the model or a safety
classifier declined (Anthropic `refusal`, OpenAI `content_filter` / a refusal part); `pause_turn`:
Anthropic paused a long turn, to be continued by sending it back as it is; `context_window_exceeded`:
the reply filled the model's window (Anthropic `model_context_window_exceeded`)."""


class CallResult(BaseModel):
    """One successful model call."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    assistant: AssistantMessage | None
    """The reply as a transcript message; None when the model produced nothing (an empty turn)."""
    usage: Usage
    raw_usage: dict[str, Any]
    """The usage payload exactly as the server reported it (merged across stream events)."""
    stop_reason: StopReason
    raw_stop_reason: str | None = None
    """The provider's own word for why generation stopped."""
    stop_details: dict[str, Any] | None = None
    """What the provider said about the stop, when it said more than a word (Anthropic's refusal
    `stop_details`: `category`, `explanation`)."""
    model: str
    """The model the server says answered (may carry a dated suffix)."""
    request_id: str | None = None
    """The provider's request id (response header), for support tickets."""
    response_id: str | None = None
    """The message / completion id in the body."""
    ttft_s: float | None = None
    """Seconds from sending the request to the first streamed content."""
    latency_s: float
    """Seconds from sending the request to the end of the stream."""
    request_body: dict[str, Any] = Field(default_factory=dict, repr=False)
    """The body handed to the SDK (kept for debugging and the wire tests; not stored in the ledger)."""


ErrorKind = Literal[
    "rate_limited",  # 429
    "overloaded",  # Anthropic 529 / overloaded_error
    "server_error",  # 5xx
    "timeout",
    "connection",
    "client_error",  # 4xx other than 408 / 409 / 429: the request itself is wrong
    "auth",  # 401 / 403
    "bad_response",  # the server answered with something we cannot read
    "broken_stream",  # a stream that ended before its last event, or carried a line that is not JSON
]

RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"rate_limited", "overloaded", "server_error", "timeout", "connection", "broken_stream"}
)


class CallError(Exception):
    """A model call that failed. `retryable` says whether the same request may succeed later."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        status: int | None = None,
        retry_after_s: float | None = None,
        request_id: str | None = None,
        partial_usage: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s
        self.request_id = request_id
        self.partial_usage = partial_usage
        self.attempts = 1
        self.out_of_time = False
        """Set when the call (or its retries) ran into the run's wall-time limit."""

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.kind}{status}: {self.message}"


class Backend(Protocol):
    """A model behind one wire API. `call` is one attempt; retries wrap it from outside."""

    wire: str
    """"anthropic_messages", "openai_chat" or "openai_responses"."""
    model: str
    label: str
    """The model spec as the user wrote it (what the ledger calls the backend)."""
    effort: Effort | None
    """The reasoning effort every request asks for (None: the model's default); the session sets it."""

    def call(self, prompt: Prompt, *, max_tokens: int, on_text: TextSink | None = None) -> CallResult: ...

    def close(self) -> None: ...


@runtime_checkable
class Abortable(Protocol):
    """A backend whose open calls another thread can stop (the SDK backends; fakes need not be)."""

    def abort(self) -> None:
        """Stop every call this backend has open now; each raises a CallError in its own thread."""
        ...


class OpenCall:
    """One call a backend has open: its HTTP response once the headers arrived, and whether another
    thread asked it to stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._response: Any = None
        self.aborted = False

    def attach(self, response: Any) -> None:
        """Remember the call's streamed response; stop at once if it was aborted while waiting."""
        with self._lock:
            self._response = response
            aborted = self.aborted
        if aborted:
            _shut_down(response)
        self.check()

    def check(self) -> None:
        if self.aborted:
            raise CallError("the call was stopped before it finished", kind="connection")

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            response = self._response
        if response is not None:
            _shut_down(response)


def _shut_down(response: Any) -> None:
    """Wake the thread reading `response` and tell the server to stop. Closing the response from
    another thread is not enough: on Linux, closing a socket leaves a recv() blocked on it waiting,
    while shutting it down ends that recv at once. The plain-socket method is called even on a TLS
    socket, whose own `shutdown` would tear down TLS state the reading thread still uses."""
    extensions = getattr(response, "extensions", None) or {}
    stream = extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass  # already closed


class InFlight:
    """The calls a backend has open, so that `abort` (from any thread) can stop them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[OpenCall] = set()

    @contextmanager
    def track(self) -> Iterator[OpenCall]:
        call = OpenCall()
        with self._lock:
            self._open.add(call)
        try:
            yield call
        finally:
            with self._lock:
                self._open.discard(call)

    def abort(self) -> int:
        """Stop every open call; returns how many there were."""
        with self._lock:
            calls = list(self._open)
        for call in calls:
            call.abort()
        return len(calls)


def map_stop_reason(raw: str | None) -> StopReason:
    """Both wire APIs' stop words mapped onto one vocabulary."""
    return {
        "end_turn": "end_turn",
        "stop": "end_turn",
        "tool_use": "tool_use",
        "tool_calls": "tool_use",
        "function_call": "tool_use",
        "max_tokens": "max_tokens",
        "length": "max_tokens",
        "stop_sequence": "stop_sequence",
        "refusal": "refusal",
        "content_filter": "refusal",
        "pause_turn": "pause_turn",
        "model_context_window_exceeded": "context_window_exceeded",
    }.get(raw or "", "other")


# ------------------------------------------------------------------------------------------------
# What the adapters share while rendering and streaming
# ------------------------------------------------------------------------------------------------

BlockKey = tuple[str, int | None, int]
"""The block a cache mark sits on: ("tools" | "system" | "docs", None, block index) for the head,
("message", message index, block index) for history and tail."""


def block_key(mark: Breakpoint) -> BlockKey:
    kind = "message" if mark.kind in ("history", "tail") else mark.kind
    return (kind, mark.message_index, mark.block_index)


class RenderReport:
    """Which planned marks a rendered request carries, and which it could not (for tests and debugging)."""

    def __init__(self) -> None:
        self.placed: list[Breakpoint] = []
        self.unplaced: list[Breakpoint] = []


class PlannedMarks:
    """The prompt's planned cache marks by the block they sit on. A renderer `take`s the mark of each
    block it writes; `finish` reports the marks no block took."""

    def __init__(self, prompt: Prompt, report: RenderReport) -> None:
        self._by_block = {block_key(mark): mark for mark in prompt.breakpoints}
        self._taken: set[BlockKey] = set()
        self._report = report

    def take(self, key: BlockKey) -> Breakpoint | None:
        mark = self._by_block.get(key)
        if mark is not None:
            self._taken.add(key)
            self._report.placed.append(mark)
        return mark

    def finish(self) -> None:
        self._report.unplaced.extend(mark for key, mark in self._by_block.items() if key not in self._taken)


class OpenAIContent:
    """Message content on OpenAI's wires (Chat Completions and Responses): one string, or, when the
    projection planned explicit marks for GPT-5.6+ (family "openai_breakpoints"), a list of text
    parts, each carrying its `prompt_cache_breakpoint`. In parts mode every piece is a part whether
    marked or not, so adding or moving a mark never changes how the rest of a message is spelled."""

    part_type = "text"
    """The text part's `type` on this wire ("text" in Chat Completions, "input_text" in Responses)."""
    join = "\n\n"
    """Pieces of one message are joined with a blank line when content is a plain string."""

    def __init__(self, prompt: Prompt, marks: PlannedMarks) -> None:
        self.marks = marks
        # Anthropic-family marks on this wire are for a gateway that passes Anthropic's
        # `cache_control` through on content parts (OpenRouter's Claude models).
        self.family = prompt.family
        self.parts_mode = prompt.family in ("openai_breakpoints", "anthropic")

    def part(self, text: str, key: BlockKey) -> dict[str, Any]:
        part: dict[str, Any] = {"type": self.part_type, "text": text}
        mark = self.marks.take(key)
        if mark is not None:
            if self.family == "anthropic":
                part["cache_control"] = {"type": "ephemeral", "ttl": mark.ttl}
            else:
                part["prompt_cache_breakpoint"] = openai_breakpoint(mark)
        return part

    def content(self, pieces: list[tuple[str, BlockKey]]) -> Any:
        if self.parts_mode:
            return [self.part(text, key) for text, key in pieces]
        return self.join.join(text for text, _ in pieces)


def context_rides_with_tool_results(message: Any) -> bool:
    """Whether a user turn's frozen context (`ContextBlock`s) goes inside its last tool output
    rather than into a user message of its own: a turn made only of tool results (the harness's
    turn between two tool rounds) has no user message, and adding one would make every tool
    step a new user query. Chat templates such as Qwen3's drop the reasoning of every assistant
    turn before the last user query (changing the rendered prefix, so the prefix cache misses
    too), and reasoning-scope rules that count user turns (GPT-5.6 `reasoning.context`) reset."""
    content = getattr(message, "content", ())
    has_results = any(isinstance(b, ToolResultBlock) for b in content)
    has_text = any(isinstance(b, TextBlock) and b.text for b in content)
    return has_results and not has_text


def openai_breakpoint(mark: Breakpoint) -> dict[str, str]:
    """An explicit OpenAI cache breakpoint (GPT-5.6+) with the mark's TTL."""
    return {"mode": "explicit", "ttl": mark.ttl}


def native_raw(block: Any, api: str) -> str | None:
    """The JSON text `block` arrived in, when it came from the wire API `api`; else None. Content is
    only re-sent byte for byte to the kind of server that produced it."""
    native = getattr(block, "native", None)
    if native is not None and native.api == api:
        return native.raw
    return None


class StreamTimer:
    """Time to first streamed content and total latency of one call, from when it was sent."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.ttft_s: float | None = None

    def content_arrived(self) -> None:
        if self.ttft_s is None:
            self.ttft_s = time.monotonic() - self.started

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def sendable_arguments(text: str) -> str:
    """A tool call's argument text as it may go back to a server: unchanged, byte for byte, when it
    is a JSON object; otherwise (a reply cut off mid-call at the output limit, a model that wrote
    something else) the same wrapping the Anthropic wire uses, as canonical JSON, so strict servers
    accept the request ("function.arguments is not valid JSON") and every resend is the same bytes."""
    if not text.strip():
        return "{}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = {"_unparsed_arguments": text}
    else:
        if isinstance(value, dict):
            return text
        value = {"_arguments": value}
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
