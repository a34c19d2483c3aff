"""Turning the SDKs' exceptions into one `CallError` that says what went wrong and whether to retry.

Both official SDKs (anthropic, openai) share the same exception shapes: `APIStatusError` with a
response, `APITimeoutError`, `APIConnectionError`. An error can also arrive *inside* a stream that
started with HTTP 200 (Anthropic sends `event: error` with `overloaded_error` when it sheds load
mid-stream); its status is then 200 and only the body's error type tells what happened.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import anthropic
import httpx2
import openai

from hitrate.harness.wire.types import CallError, ErrorKind

# Error types in a body (Anthropic's `error.type`, OpenAI's `error.type` / `error.code`) that mean
# "try again later", whatever the HTTP status said.
_BODY_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "server_error",
    "server_error": "server_error",
    "timeout_error": "timeout",
    "rate_limit_exceeded": "rate_limited",
    "insufficient_quota": "client_error",  # a 429 that no amount of waiting fixes
}

_STATUS_ERRORS = (anthropic.APIStatusError, openai.APIStatusError)
_TIMEOUTS = (anthropic.APITimeoutError, openai.APITimeoutError)
_CONNECTION = (anthropic.APIConnectionError, openai.APIConnectionError)


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """The server's requested wait: `retry-after-ms`, else `retry-after` in seconds or as an HTTP date."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    if parsed is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, parsed.timestamp() - now)


def _body_error(body: Any) -> tuple[str | None, str | None]:
    """(error type, message) from an error body of either API."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            kind = err.get("type") or err.get("code")
            message = err.get("message")
            return (str(kind) if kind else None, str(message) if message else None)
        if isinstance(err, str):
            return None, err
    if isinstance(body, str) and body:
        return None, body
    return None, None


def _kind_for_status(status: int, body_type: str | None) -> ErrorKind:
    if body_type in _BODY_KINDS and (status == 200 or body_type == "insufficient_quota" or status >= 500 or status == 429):
        return _BODY_KINDS[body_type]
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if status in (408,):
        return "timeout"
    if status in (409,):
        # Anthropic and OpenAI both document 409 (lock / conflict) as safe to retry.
        return "server_error"
    if status >= 500:
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status == 200:
        return "bad_response"
    return "client_error"


def _is_context_overflow(message: str) -> bool:
    """A refusal because prompt + max_tokens does not fit the context window. Wordings differ:
    the bundled engine and vLLM name max_tokens, OpenAI-style servers the "completion"."""
    text = message.lower()
    return "context" in text and ("max_tokens" in text or "completion" in text)


def is_timeout_error(exc: BaseException) -> bool:
    """Whether `exc` is a wait that ran out (the SDKs' timeout error, or the transport's own once a
    stream has started)."""
    return isinstance(exc, (*_TIMEOUTS, httpx2.TimeoutException))


def from_sdk_error(exc: BaseException, *, where: str) -> CallError:
    """A CallError for any exception raised while calling an SDK. `where` names the backend."""
    if isinstance(exc, CallError):
        return exc
    if isinstance(exc, _TIMEOUTS):
        return CallError(f"{where}: the request timed out", kind="timeout")
    if isinstance(exc, _CONNECTION):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        return CallError(f"{where}: could not reach the server{detail}", kind="connection")
    if isinstance(exc, _STATUS_ERRORS):
        response = exc.response
        status = response.status_code
        body_type, body_message = _body_error(exc.body)
        kind = _kind_for_status(status, body_type)
        headers = response.headers
        request_id = headers.get("request-id") or headers.get("x-request-id")
        message = body_message or str(exc)
        if kind == "auth":
            message += " (check the API key for this provider)"
        elif kind == "client_error" and _is_context_overflow(message):
            message += " (--max-output-tokens sets max_tokens for each call)"
        label = f"{body_type}: " if body_type else ""
        return CallError(
            f"{where}: {label}{message}",
            kind=kind,
            status=status,
            retry_after_s=retry_after_seconds(headers),
            request_id=request_id,
        )
    if isinstance(exc, openai.APIError) and isinstance(exc.body, dict):
        # Chat Completions sends a failure that happens after the 200 as a data line holding an
        # `error` object ({"error": {"type": "server_error", ...}}); the SDK raises it as a bare
        # APIError with that object as its body. Its type says whether to retry, as a status's would.
        body_type, body_message = _body_error(exc.body)
        label = f"{body_type}: " if body_type else ""
        return CallError(f"{where}: {label}{body_message or exc.message} (in the stream)", kind=_kind_for_status(200, body_type))
    if isinstance(exc, (anthropic.AnthropicError, openai.OpenAIError)):
        return CallError(f"{where}: {type(exc).__name__}: {exc}", kind="bad_response")
    raise exc


def stream_error(
    exc: BaseException, *, where: str, request_id: str | None, partial_usage: dict[str, Any] | None = None
) -> CallError:
    """A CallError for an exception raised while a streamed call was open, carrying the request id
    and whatever usage the stream had reported. Once the stream has started, the SDK no longer wraps
    transport failures, so a timeout or a dropped connection arrives as the transport's own error."""
    if isinstance(exc, CallError):
        error = exc
    elif isinstance(exc, json.JSONDecodeError):
        # The SDKs parse each SSE data line as JSON and raise the parser's error as is. A line cut
        # or garbled on the way is a broken call, not a reply: retried like a dropped connection.
        error = CallError(f"{where}: the stream carried a line that is not JSON ({exc.msg} at column {exc.colno}: "
                          f"{exc.doc[:80]!r})", kind="broken_stream")  # fmt: skip
    elif isinstance(exc, httpx2.TimeoutException):
        error = CallError(f"{where}: the stream timed out", kind="timeout")
    elif isinstance(exc, httpx2.TransportError):
        error = CallError(f"{where}: the stream broke off ({type(exc).__name__}: {exc})", kind="connection")
    else:
        error = from_sdk_error(exc, where=where)
    error.request_id = error.request_id or request_id
    if partial_usage:
        error.partial_usage = partial_usage
    return error
