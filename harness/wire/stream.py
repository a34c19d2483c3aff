"""The part of a streamed model call every wire shares: open the stream under the backend's
in-flight tracker (so `abort` from another thread stops it at once), read its events with a check
between each, turn whatever goes wrong into one `CallError` carrying the request id and the usage
seen so far, and time it.

    with StreamedCall(self._inflight, where, openai.OpenAIError, request_id_header="x-request-id") as call:
        stream = self._client.chat.completions.create(**request)
        for chunk in call.events(stream):
            ...                                  # the wire's own event handling
        call.partial_usage = ...                 # what the stream reported before a failure
    result = call.result(assistant=..., usage=..., ...)

A wire supplies only what is its own: the request body, the SDK call, the event handling, the
usage reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx2

from hitrate.harness.wire.errors import stream_error
from hitrate.harness.wire.types import CallError, CallResult, InFlight, OpenCall, StopReason, StreamTimer
from hitrate.projection.transcript import AssistantMessage
from hitrate.store.usage import Usage


class StreamedCall:
    def __init__(
        self,
        inflight: InFlight,
        where: str,
        sdk_error: type[BaseException],
        *,
        request_id_header: str,
        refine: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.where = where
        self.timer = StreamTimer()
        self.request_id: str | None = None
        self.partial_usage: dict[str, Any] | None = None
        """Usage the stream reported before it failed (kept on the failed call's ledger row)."""
        self._inflight = inflight
        self._caught = (CallError, sdk_error, httpx2.TransportError)
        self._header = request_id_header
        self._refine = refine
        """Called first with a failure; may raise a more specific exception of the wire's own."""
        self._tracking: Any = None
        self.tracked: OpenCall | None = None

    def __enter__(self) -> "StreamedCall":
        self._tracking = self._inflight.track()
        self.tracked = self._tracking.__enter__()
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            if isinstance(exc, self._caught):
                if self._refine is not None:
                    self._refine(exc)
                error = stream_error(exc, where=self.where, request_id=self.request_id, partial_usage=self.partial_usage)
                if error is not exc:
                    raise error from exc
            return False
        finally:
            self._tracking.__exit__(kind, exc, tb)

    def check(self) -> None:
        """Raise if the call was aborted (for calls that do not stream)."""
        if self.tracked is not None:
            self.tracked.check()

    def events(self, stream: Any) -> Iterator[Any]:
        """The stream's events, checking for an abort before each and once after the last."""
        assert self.tracked is not None, "events() is read inside `with StreamedCall(...)`"
        response = getattr(stream, "response", None)
        if response is not None:
            self.request_id = response.headers.get(self._header)
        with stream:
            if response is not None:
                self.tracked.attach(response)
            for event in stream:
                self.tracked.check()
                yield event
            self.tracked.check()

    def result(
        self,
        *,
        assistant: AssistantMessage | None,
        usage: Usage,
        raw_usage: dict[str, Any],
        stop_reason: StopReason,
        raw_stop_reason: str | None,
        model: str,
        response_id: str | None,
        request_body: dict[str, Any],
        streamed: bool = True,
        stop_details: dict[str, Any] | None = None,
    ) -> CallResult:
        return CallResult(
            assistant=assistant,
            usage=usage,
            raw_usage=raw_usage,
            stop_reason=stop_reason,
            raw_stop_reason=raw_stop_reason,
            stop_details=stop_details,
            model=model,
            request_id=self.request_id,
            response_id=response_id,
            ttft_s=self.timer.ttft_s if streamed else None,
            latency_s=self.timer.elapsed(),
            request_body=request_body,
        )
