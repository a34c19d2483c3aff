"""Run the HTTP server in a background thread on 127.0.0.1 (tests, in-process clients, demos).

    with ServerThread(create_app(engine)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from fastapi import FastAPI


class ServerThread:
    """uvicorn serving `app` on `host:port` (port 0: a free port) in a daemon thread."""

    def __init__(self, app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = self._socket.getsockname()[:2]
        config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"uvicorn-{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "ServerThread":
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server thread exited during start-up")
            if time.monotonic() > deadline:
                raise TimeoutError(f"server did not start within {timeout_s} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)
        self._socket.close()

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
