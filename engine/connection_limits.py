"""Connection limits for `hitrate serve`: uvicorn's h11 protocol with a deadline for each request
head and caps on open connections.

uvicorn closes a keep-alive connection that stays idle after a response (`timeout_keep_alive`),
but not one that never sends a request, nor one that sends its head a line every few seconds (each
byte resets its timer): 50 silent and 50 trickling connections were all still open after 95 s, and
with the file-descriptor limit at 256, 250 idle sockets stopped `/health` (`Too many open files`).
Its `limit_concurrency` answers 503 to a request but keeps the connection. So:

- each request head must be complete within `head_timeout_s` of the connection opening, or of the
  previous response ending (a keep-alive connection's next request); otherwise it is closed;
- past `max_connections` open connections in all, or `max_per_client` from one address, a new
  connection is closed as soon as it is accepted, before it costs anything more.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HEAD_TIMEOUT_S = 5.0
DEFAULT_MAX_PER_CLIENT = 64
# Descriptors the server keeps for itself beyond its connections: the model files, logs, the
# listening socket, the event loop.
_RESERVED_DESCRIPTORS = 64


def default_max_connections() -> int:
    """Half of the file-descriptor limit (less what the server needs itself), at most 1024."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(8, min(1024, (soft - _RESERVED_DESCRIPTORS) // 2))


class GuardedH11Protocol(H11Protocol):
    """One connection; the class attributes are set by `guarded_protocol`."""

    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S
    max_connections: int = 1024
    max_per_client: int = DEFAULT_MAX_PER_CLIENT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        host = self.client[0] if self.client else None
        same_client = sum(1 for other in self.connections if getattr(other, "client", None) and other.client[0] == host)
        if len(self.connections) > self.max_connections or (host is not None and same_client > self.max_per_client):
            transport.close()
            return
        self._wait_for_head()

    def _wait_for_head(self) -> None:
        self._cancel_head_timer()
        self._waiting_cycle = self.cycle
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _head_arrived(self) -> bool:
        return self.cycle is not None and self.cycle is not getattr(self, "_waiting_cycle", None)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_arrived():
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle.response_complete:
            self._wait_for_head()  # the next request's head has the same deadline
        elif self._head_arrived():
            self._cancel_head_timer()  # a pipelined request was already read

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)


def guarded_protocol(
    *, head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S, max_connections: int | None = None,
    max_per_client: int = DEFAULT_MAX_PER_CLIENT,
) -> type[GuardedH11Protocol]:  # fmt: skip
    """A protocol class for `uvicorn.Config(http=...)` with these limits."""
    if head_timeout_s <= 0 or max_per_client < 1:
        raise ValueError("head_timeout_s must be positive and max_per_client at least 1")
    limits: dict[str, Any] = {
        "head_timeout_s": head_timeout_s,
        "max_connections": max_connections if max_connections is not None else default_max_connections(),
        "max_per_client": max_per_client,
    }
    return type("LimitedH11Protocol", (GuardedH11Protocol,), limits)
