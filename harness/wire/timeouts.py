"""How long one model call may wait, at each stage, and by when it must be over.

Three waits, each with its own limit, because each means something different:

- connect: reaching the server (TCP, TLS). Seconds at most on a working network.
- first byte: from sending the request to the response headers. Streaming APIs send headers as
  soon as they accept the request, so a long silence here is a server that will not answer.
- idle: the longest silence between two chunks of a streamed reply. A reasoning model may think
  for minutes between events (Anthropic sends `ping` events meanwhile; Codex's default stream idle
  timeout is 300 s), so this one is generous.

On top of these, a call has a deadline when the run has a wall-time limit (`--max-wall`): no wait
goes past what is left of it, and a stream still open at the deadline is stopped there. The agent
sets the budget for the calls it makes (`CallBudget.run`), in the thread that makes them; a wire
reads it through `StreamedCall`. A call made outside any budget (a backend used on its own) keeps
its client's single timeout and has no deadline.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx2
from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class CallTimeouts(BaseModel):
    """The waits of every model call (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_s: float = Field(default=10.0, gt=0)
    """Seconds to connect to the server."""
    first_byte_s: float = Field(default=120.0, gt=0)
    """Seconds from sending the request to the response headers."""
    idle_s: float = Field(default=300.0, gt=0)
    """Seconds of silence allowed between two chunks of a streamed reply."""


@dataclass(frozen=True)
class CallBudget:
    """The waits of one call, and the moment (time.monotonic) by which it must be over, if any."""

    timeouts: CallTimeouts = CallTimeouts()
    deadline: float | None = None

    def left(self) -> float | None:
        """Seconds until the deadline (never below 0); None without one."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def _bounded(self, seconds: float) -> float:
        left = self.left()
        # httpx treats 0 as "no wait at all"; a sliver keeps the error a timeout.
        return seconds if left is None else max(0.001, min(seconds, left))

    def request_timeout(self) -> httpx2.Timeout:
        """The SDK request's timeout: up to the response headers (the stream's body reads are
        bounded by `idle_timeout` once they start)."""
        t = self.timeouts
        return httpx2.Timeout(
            connect=self._bounded(t.connect_s), read=self._bounded(t.first_byte_s),
            write=self._bounded(t.idle_s), pool=self._bounded(t.connect_s),
        )

    def idle_timeout(self) -> float:
        return self._bounded(self.timeouts.idle_s)

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` with this budget as the current one (in this thread)."""
        token = _current.set(self)
        try:
            return fn()
        finally:
            _current.reset(token)


_current: contextvars.ContextVar[CallBudget | None] = contextvars.ContextVar("hitrate_call_budget", default=None)


def current_budget() -> CallBudget | None:
    """The budget the caller set for calls made in this thread; None when none was set (the
    backend's own client timeout then applies, as given to its constructor)."""
    return _current.get()
