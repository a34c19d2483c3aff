"""What every provider adapter returns, and the one seam the agent loop calls.

One module per wire API renders a wire-neutral `Prompt` into its own request format, streams the
reply, and hands back a `CallResult`: the assistant turn as a transcript message (content the model
produced kept exactly as received), the normalized `Usage`, the raw usage as the server sent it,
the stop reason and timings. A failed call raises `CallError`, which says whether trying again can
help; `hitrate.harness.retry` decides what to do with it. The pieces both adapters use while
rendering (placing the planned cache marks) and streaming (timing the reply) live here too.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from hitrate.projection.prompt import Breakpoint, Prompt
from hitrate.projection.transcript import AssistantMessage
from hitrate.store.usage import Usage

TextSink = Callable[[str], None]
"""Receives each streamed text delta of the reply as it arrives."""

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]


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
]

RETRYABLE_KINDS: frozenset[str] = frozenset({"rate_limited", "overloaded", "server_error", "timeout", "connection"})


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

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.kind}{status}: {self.message}"


class Backend(Protocol):
    """A model behind one wire API. `call` is one attempt; retries wrap it from outside."""

    wire: str
    """"anthropic_messages" or "openai_chat"."""
    model: str
    label: str
    """The model spec as the user wrote it (what the ledger calls the backend)."""

    def call(self, prompt: Prompt, *, max_tokens: int, on_text: TextSink | None = None) -> CallResult: ...

    def close(self) -> None: ...


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
