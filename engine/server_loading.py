"""Serving while the model loads: `/health` answers 503 `{"status": "loading"}` until it is ready.

A load takes seconds to minutes. vLLM binds its port before it builds the engine (so a port in use
fails at once) but listens only once the engine is built: until then a client's connection is
refused. llama.cpp's server listens at once and answers `/health` with 503 "Loading model" until
the model is in. hitrate does what llama.cpp does: the port is bound and answering from the
first second, so a port in use still fails at once, a health check sees "loading" (with the
stage under way) rather than a refused connection or a hang, and every other route answers 503
with a `Retry-After` header in the error shape of its API. When the model is ready the same
socket serves the real app (`server.create_app`); a load that fails stops the server and
re-raises in the caller.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable

import uvicorn
from starlette.responses import JSONResponse

from hitrate.engine.api import Engine
from hitrate.engine.load_progress import LoadProgress
from hitrate.engine.wire import anthropic as wire_anthropic
from hitrate.engine.wire import openai as wire_openai

RETRY_AFTER_S = 5


class LoadingGate:
    """An ASGI app that answers 503 while the model loads, then passes every request to `open`'s app."""

    def __init__(self, progress: LoadProgress | None = None) -> None:
        self.progress = progress
        self.started = time.monotonic()
        self.app: Callable | None = None

    def open(self, app: Callable) -> None:
        self.app = app

    def loading_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"status": "loading", "seconds": round(time.monotonic() - self.started, 1)}
        if self.progress is not None:
            status["stage"] = self.progress.current
            status["done"] = [stage.name for stage in self.progress.stages]
        return status

    async def __call__(self, scope, receive, send) -> None:
        app = self.app
        if app is not None:
            await app(scope, receive, send)
            return
        if scope["type"] == "lifespan":  # the real app has no start-up work; none is waited for here
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if path == "/health":
            response = JSONResponse(self.loading_status(), status_code=503, headers=headers)
        else:
            stage = self.progress.current if self.progress is not None else None
            message = (f"the model is still loading{f' ({stage})' if stage else ''}; "
                       f"retry when /health answers 200")
            if path.startswith("/v1/messages"):
                body = wire_anthropic.error_body(message, type_="overloaded_error")
            else:
                body = wire_openai.error_body(message, type_="service_unavailable", code="model_loading")
            response = JSONResponse(body, status_code=503, headers=headers)
        await response(scope, receive, send)


class LoadingServer:
    """uvicorn on `sock` in front of a `LoadingGate` while `load()` runs on a thread of its own;
    `make_app(engine)` is served once it returns. `on_ready(engine)` runs then (a banner)."""

    def __init__(self, load: Callable[[], Engine], make_app: Callable[[Engine], Callable], *, sock: socket.socket,
                 progress: LoadProgress | None = None, on_ready: Callable[[Engine], None] | None = None,
                 log_level: str = "info") -> None:
        self.gate = LoadingGate(progress)
        self._load, self._make_app, self._on_ready = load, make_app, on_ready
        self._sock = sock
        self.server = uvicorn.Server(uvicorn.Config(self.gate, log_level=log_level, lifespan="off",
                                                    timeout_graceful_shutdown=5))
        self.engine: Engine | None = None
        self._error: BaseException | None = None
        self.ready = threading.Event()

    def _load_and_open(self) -> None:
        try:
            engine = self._load()
            self.gate.open(self._make_app(engine))
            self.engine = engine
            if self._on_ready is not None:
                self._on_ready(engine)
        except BaseException as exc:  # re-raised by `run` once the server is down
            self._error = exc
            self.server.should_exit = True
        finally:
            self.ready.set()

    def run(self) -> Engine | None:
        """Serve until stopped (Ctrl-C, `stop`); raises the load's error if it failed. The load's
        thread is short-lived, so its OpenMP pool goes with it (`engine.compute_thread`)."""
        loader = threading.Thread(target=self._load_and_open, name="engine-load", daemon=True)
        loader.start()
        self.server.run(sockets=[self._sock])
        if self._error is not None:
            raise self._error
        return self.engine

    def stop(self) -> None:
        self.server.should_exit = True
