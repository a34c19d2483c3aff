"""Slow and idle connections against `hitrate serve`'s HTTP layer, with raw sockets.

50 silent and 50 one-header-line-every-10-s connections were all open after 95 s, and with the
descriptor limit at 256, 250 idle sockets stopped `/health`. The limits are parameters: the tests
give short ones, so they do not depend on how busy the machine is.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn

from hitrate.engine import server as engine_server
from hitrate.engine.connection_limits import GuardedH11Protocol, guarded_protocol

pytestmark = pytest.mark.timeout(60)

HEAD_TIMEOUT_S = 0.5
REQUEST = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


async def _app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def serve():
    running: list[tuple[uvicorn.Server, threading.Thread, socket.socket]] = []

    def start(**limits) -> tuple[str, int]:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        protocol = guarded_protocol(head_timeout_s=HEAD_TIMEOUT_S, **limits)
        config = uvicorn.Config(_app, log_level="warning", http=protocol, timeout_keep_alive=1)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        running.append((server, thread, listener))
        return listener.getsockname()[:2]

    yield start
    for server, thread, listener in running:
        server.should_exit = True
        thread.join(10)
        listener.close()


def _closed_by_server(sock: socket.socket, within_s: float = 10.0) -> bool:
    """True when the server closes the connection (EOF or reset) before `within_s`."""
    sock.settimeout(within_s)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _response(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\r\n\r\nok"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _answered(address: tuple[str, int]) -> bool:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(REQUEST)
        return _response(sock).startswith(b"HTTP/1.1 200")


def test_a_connection_that_sends_nothing_is_closed(serve) -> None:
    address = serve()
    with socket.create_connection(address) as silent:
        assert _closed_by_server(silent)
    assert _answered(address)


def test_a_head_sent_a_line_at_a_time_is_closed_at_its_deadline(serve) -> None:
    address = serve()
    with socket.create_connection(address) as slow:
        slow.sendall(b"GET /health HTTP/1.1\r\n")
        closed = False
        for number in range(100):  # 20 s of header lines, each well inside uvicorn's keep-alive timer
            try:
                slow.sendall(f"X-Line-{number}: y\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.2)
            slow.setblocking(False)
            try:
                if slow.recv(4096) == b"":
                    closed = True
                    break
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed = True
                break
            finally:
                slow.setblocking(True)
        assert closed


def test_an_idle_keep_alive_connection_is_closed_after_its_response(serve) -> None:
    address = serve()
    with socket.create_connection(address) as sock:
        sock.sendall(REQUEST)
        assert _response(sock).startswith(b"HTTP/1.1 200")
        assert _closed_by_server(sock)


def test_a_keep_alive_connection_may_send_its_next_request(serve) -> None:
    address = serve()
    with socket.create_connection(address, timeout=10) as sock:
        for _ in range(3):
            sock.sendall(REQUEST)
            assert _response(sock).startswith(b"HTTP/1.1 200")


def test_connections_past_the_per_client_cap_are_closed_and_the_server_keeps_answering(serve) -> None:
    address = serve(max_per_client=5, max_connections=100)
    held = [socket.create_connection(address) for _ in range(5)]
    try:
        time.sleep(0.1)
        extra = socket.create_connection(address)
        assert _closed_by_server(extra, within_s=HEAD_TIMEOUT_S / 2)  # closed at once, not at the deadline
        extra.close()
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.1)
    assert _answered(address)


def test_connections_past_the_total_cap_are_closed(serve) -> None:
    address = serve(max_per_client=100, max_connections=4)
    held = [socket.create_connection(address) for _ in range(4)]
    try:
        time.sleep(0.1)
        extra = socket.create_connection(address)
        assert _closed_by_server(extra, within_s=HEAD_TIMEOUT_S / 2)
        extra.close()
    finally:
        for sock in held:
            sock.close()


def test_hitrate_serve_runs_uvicorn_with_the_limits(monkeypatch) -> None:
    seen: list[uvicorn.Config] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: seen.append(self.config))
    monkeypatch.setattr(engine_server, "create_app", lambda *a, **k: _app)
    engine_server.serve(object(), port=0)  # type: ignore[arg-type]
    assert issubclass(seen[0].http, GuardedH11Protocol) and seen[0].timeout_keep_alive <= 5
