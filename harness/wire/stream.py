"""The part of a streamed model call every wire shares: open the stream under the backend's
in-flight tracker (so `abort` from another thread stops it at once), read its events with a check
between each, turn whatever goes wrong into one `CallError` carrying the request id and the usage
seen so far, and time it.

    with StreamedCall(self._inflight, where, openai.OpenAIError, request_id_header="x-request-id") as call:
        stream = self._client.chat.completions.create(**request, **call.timeout)
        for chunk in call.events(stream):
            ...                                  # the wire's own event handling
        call.partial_usage = ...                 # what the stream reported before a failure
    result = call.result(assistant=..., usage=..., ...)

Each call's waits come from the budget its caller set (`CallBudget.run`, in `timeouts`): the SDK call takes
`**call.timeout` (connect, first byte), the body reads the idle timeout, and a watchdog stops
the stream at the run's deadline.

A wire supplies only what is its own: the request body, the SDK call, the event handling, the
usage reading, and which event ends a whole reply (`last_event`; the wire calls `call.end()` when it
arrives). A stream that closes before it is a broken call, retried, never taken as the answer; so
is a stream line that is not JSON.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx2

from hitrate.harness.wire.errors import is_timeout_error as _is_timeout
from hitrate.harness.wire.errors import stream_error
from hitrate.harness.wire.timeouts import CallBudget, current_budget
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
        last_event: str | None = None,
    ) -> None:
        self.where = where
        self._last_event = last_event
        """The event that ends a complete stream on this wire; `events` refuses a stream that ends
        before the wire saw it (`ended`)."""
        self.ended = False
        """Set by the wire when the stream's last event arrived."""
        self.timer = StreamTimer()
        self.request_id: str | None = None
        self.partial_usage: dict[str, Any] | None = None
        """Usage the stream reported before it failed (kept on the failed call's ledger row)."""
        self._inflight = inflight
        self._caught = (CallError, sdk_error, httpx2.TransportError, json.JSONDecodeError)
        self._header = request_id_header
        self._refine = refine
        """Called first with a failure; may raise a more specific exception of the wire's own."""
        self._tracking: Any = None
        self.tracked: OpenCall | None = None
        self.budget = current_budget()
        """How long this call may wait at each stage, and its deadline (`timeouts`); None: the
        client's own timeout."""
        self._streaming = False
        self._watchdog: threading.Timer | None = None
        self._out_of_time = False

    @property
    def timeout(self) -> dict[str, httpx2.Timeout]:
        """Keyword arguments for the SDK call: its `timeout` (connect, first byte, bounded by the
        deadline) when a budget was set; none otherwise (the client's own timeout applies)."""
        return {"timeout": self.budget.request_timeout()} if self.budget is not None else {}

    def __enter__(self) -> "StreamedCall":
        self._tracking = self._inflight.track()
        self.tracked = self._tracking.__enter__()
        left = self.budget.left() if self.budget is not None else None
        if left is not None:
            # A stream still open at the run's deadline is stopped there, whatever it is doing.
            self._watchdog = threading.Timer(left, self._stop_at_deadline)
            self._watchdog.daemon = True
            self._watchdog.start()
        return self

    def _stop_at_deadline(self) -> None:
        self._out_of_time = True
        if self.tracked is not None:
            self.tracked.abort()

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if self._watchdog is not None:
            self._watchdog.cancel()
        try:
            if isinstance(exc, self._caught):
                if self._refine is not None:
                    self._refine(exc)
                error = self._timed_out(exc) or stream_error(
                    exc, where=self.where, request_id=self.request_id, partial_usage=self.partial_usage
                )
                if error is not exc:
                    raise error from exc
            return False
        finally:
            self._tracking.__exit__(kind, exc, tb)

    def _timed_out(self, exc: BaseException) -> CallError | None:
        """The failure said as the wait that ran out, when one did: which stage, after how long."""
        budget = self.budget or CallBudget()
        t = budget.timeouts
        if self._out_of_time or (budget.left() == 0.0 and _is_timeout(exc)):
            error = CallError(f"{self.where}: stopped at the run's wall-time limit (--max-wall) before the call finished",
                              kind="timeout", request_id=self.request_id, partial_usage=self.partial_usage)  # fmt: skip
            error.out_of_time = True
            return error
        if not _is_timeout(exc):
            return None
        if self._streaming:
            what = f"the stream sent nothing for {t.idle_s:g}s (idle timeout)"
        elif isinstance(exc.__cause__, httpx2.ConnectTimeout) or isinstance(exc, httpx2.ConnectTimeout):
            what = f"could not connect within {t.connect_s:g}s (connect timeout)"
        else:
            what = f"no response within {t.first_byte_s:g}s of sending the request (first-byte timeout)"
        return CallError(f"{self.where}: {what}", kind="timeout", request_id=self.request_id, partial_usage=self.partial_usage)

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
                if self.budget is not None:
                    _set_read_timeout(response, self.budget.idle_timeout())
            self._streaming = True
            for event in stream:
                self.tracked.check()
                yield event
            self.tracked.check()
        if self._last_event is not None and not self.ended:
            # The connection closed cleanly, but the reply is not whole: a proxy or server that
            # gave up mid-answer. Taking it as the answer would act on half a reply.
            raise CallError(f"{self.where}: the stream ended before {self._last_event}", kind="broken_stream")

    def end(self) -> None:
        """The stream's last event arrived: the reply is whole."""
        self.ended = True

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


def _set_read_timeout(response: Any, seconds: float) -> None:
    """Bound each read of the stream's body by `seconds` (the idle timeout) instead of the wait for
    the headers. httpcore reads the request's timeout mapping when it starts reading the body, which
    happens after this: the SDK returns the stream with its body unread."""
    request = getattr(response, "request", None)
    timeouts = getattr(request, "extensions", {}).get("timeout") if request is not None else None
    if isinstance(timeouts, dict):
        timeouts["read"] = seconds
