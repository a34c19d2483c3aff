"""Waiting on a model call, or between retries, so that cancelling takes effect at once.

A streamed call can sit silent for a long time: before the first token, or while the model thinks
or writes tool arguments (no text reaches the session then). The call therefore runs in a helper
thread while the session's thread waits for it *or* for the cancel event. On cancel (or Ctrl-C in
the waiting thread) the session gives the call up: `on_abandon` stops it where the backend can
(shutting its connection down, see `wire_types.InFlight`), and the session goes on without waiting
for the helper thread, which ends when its call does. Whatever the abandoned call returns or raises
is dropped; the session records the call as cancelled, with its usage unknown.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Generic, TypeVar

from hitrate.harness.retry import Sleep
from hitrate.harness.wire.types import Abortable, TextSink

T = TypeVar("T")

POLL_S = 0.05
"""How often the waiting thread looks at the cancel event (the longest delay cancelling can have)."""


class Cancelled(Exception):
    """The user stopped the session (cancel event or Ctrl-C)."""


class _Outcome(Generic[T]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


def call_abandonably(
    fn: Callable[[], T],
    cancel: threading.Event,
    *,
    on_abandon: Callable[[], None],
    name: str = "hitrate-call",
) -> T:
    """`fn()` run in a helper thread; its result, or its exception re-raised here. Raises
    `Cancelled` as soon as `cancel` is set while it runs (a KeyboardInterrupt here is passed on),
    after calling `on_abandon`."""
    outcome: _Outcome[T] = _Outcome()

    def work() -> None:
        try:
            outcome.value = fn()
        except BaseException as exc:  # handed to the waiting thread, whatever it is
            outcome.error = exc
        finally:
            outcome.done.set()

    # A daemon thread: an abandoned call stuck on a silent server must not keep the process alive.
    threading.Thread(target=work, name=name, daemon=True).start()
    try:
        while not outcome.done.wait(POLL_S):
            if cancel.is_set():
                raise Cancelled("cancelled while waiting for the model")
    except BaseException:
        if not outcome.done.is_set():
            on_abandon()
        raise
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]


def cancellable_sleep(cancel: threading.Event | None) -> Sleep:
    """A retry wait that ends early, raising `Cancelled`, once `cancel` is set."""

    def wait(seconds: float) -> None:
        if cancel is None:
            time.sleep(seconds)
        elif cancel.wait(seconds):
            raise Cancelled("cancelled while waiting to retry")

    return wait


class GuardedCall:
    """The attempts of one model call, stoppable at once through `cancel`.

    Text the call streams goes through `on_text`, which drops it (raising `Cancelled` in the call's
    thread, so the backend stops reading) once the call is given up or cancelled; the flag is set
    under the lock the text is passed on under, so no text reaches the sink after the session has
    moved on. Giving up also asks the backend to stop its open call, where it can (`Abortable`).
    """

    def __init__(self, backend: object, cancel: threading.Event | None, emit_text: TextSink, *, name: str = "hitrate-call") -> None:
        self._backend = backend
        self._cancel = cancel
        self._emit_text = emit_text
        self._name = name
        self._lock = threading.Lock()
        self._abandoned = False

    def on_text(self, text: str) -> None:
        with self._lock:
            if self._abandoned or (self._cancel is not None and self._cancel.is_set()):
                raise Cancelled("cancelled while the model was answering")
            self._emit_text(text)

    def attempt(self, send: Callable[[TextSink], T]) -> T:
        """One attempt: `send(on_text)` calls the backend."""
        if self._cancel is None:
            return send(self.on_text)
        return call_abandonably(lambda: send(self.on_text), self._cancel, on_abandon=self._abandon, name=self._name)

    def _abandon(self) -> None:
        with self._lock:
            self._abandoned = True
        if isinstance(self._backend, Abortable):
            self._backend.abort()
