"""Cancelling takes effect at once: a model call that is silent (no headers yet, or thinking before
its first token), a retry wait, a long shell command. What was recorded stays recorded; the
cancelled call is recorded with its error. Also: the approval hook and the call start time."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fake_llm_server import Reply, anthropic_events, openai_events, responses_events
from scripted_model import scripted_route

from hitrate.harness.agent import INTERRUPTED_NOTE, Agent
from hitrate.harness.events import CallRecorded, EventList, ToolCallFinished, ToolCallStarted
from hitrate.harness.retry import RetryPolicy
from hitrate.harness.router import Router
from hitrate.harness.session import Session, SessionConfig
from hitrate.harness.wire.types import CallError

T0 = datetime(2026, 3, 4, 9, 0, tzinfo=timezone.utc)


def fixed_context() -> dict[str, str]:
    return {"date": "2026-03-04", "workspace": "ws"}


# Each backend wire: the model spec, its environment (with {url} for the server's), and the first
# event of a streamed reply (what a model sends before it starts thinking).
WIRES = {
    "anthropic_messages": ("anthropic/claude-sonnet-5", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "{url}"},
                           lambda: anthropic_events(Reply(text="too late"), "claude-sonnet-5")[0]),
    "openai_chat": ("openai/gpt-5.5", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "{url}/v1"},
                    lambda: openai_events(Reply(text="too late"), "gpt-5.5", include_usage=True)[0]),
    "openai_responses": ("openai-responses/gpt-5.5", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "{url}/v1"},
                         lambda: responses_events(Reply(text="too late"), "gpt-5.5")[0]),
}


class SilentServer:
    """A model endpoint that goes silent: before sending headers ("headers"), or after the stream's
    first event while the model would be thinking ("thinking"). It notes when the client hangs up.
    It speaks the wire `wire` (a key of WIRES) and answers a POST to any path."""

    def __init__(self, mode: str, silence_s: float = 30.0, wire: str = "anthropic_messages") -> None:
        first_event = WIRES[wire][2]()
        self.silent = threading.Event()
        self.hung_up = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                if mode == "thinking":
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(first_event)
                    self.wfile.flush()
                server.silent.set()
                end = time.monotonic() + silence_s
                while time.monotonic() < end:
                    if server._peer_closed(self.connection):
                        server.hung_up.set()
                        self.close_connection = True
                        return
                    time.sleep(0.02)
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @staticmethod
    def _peer_closed(sock: socket.socket) -> bool:
        sock.setblocking(False)
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True
        finally:
            sock.setblocking(True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def cancel_when(event: threading.Event, cancel: threading.Event, delay_s: float = 0.1) -> None:
    def run() -> None:
        event.wait(20)
        time.sleep(delay_s)
        cancel.set()

    threading.Thread(target=run, daemon=True).start()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("mode", ["headers", "thinking"])
def test_cancel_interrupts_a_silent_model_call(mode, wire, workspace, ledger):
    server = SilentServer(mode, wire=wire)
    try:
        spec, env, _ = WIRES[wire]
        route = Router(env={k: v.format(url=server.url) for k, v in env.items()}).resolve(spec)
        assert route.backend.wire == wire
        session = Session(route, workspace, ledger=ledger, context=fixed_context)
        cancel = threading.Event()
        cancel_when(server.silent, cancel)
        began = time.monotonic()
        result = Agent(session, cancel=cancel).run("think hard")
        took = time.monotonic() - began
        session.close()
        assert result.status == "cancelled" and took < 10, f"took {took:.1f}s"
        (row,) = ledger.calls(session_id=session.id)
        assert row.error.startswith("cancelled") and row.usage.fresh_input is None  # unknown, not 0
        assert session.transcript.messages[-1].content[0].text == INTERRUPTED_NOTE
        if mode == "thinking":
            # The response had begun: its connection was shut down, so the server stops generating.
            assert server.hung_up.wait(5), "the abandoned stream was left open"
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_cancel_stops_a_running_shell_command(workspace, ledger):
    route = scripted_route([{"tool_calls": [("shell", '{"command": "echo started; sleep 60", "timeout_s": 120}'),
                                            ("list_dir", "{}")]}])
    events = EventList()
    cancel = threading.Event()

    def sink(event) -> None:
        events(event)
        if isinstance(event, ToolCallStarted):
            threading.Timer(0.5, cancel.set).start()

    session = Session(route, workspace, ledger=ledger, sink=sink, context=fixed_context)
    began = time.monotonic()
    result = Agent(session, cancel=cancel).run("wait a minute")
    assert result.status == "cancelled" and time.monotonic() - began < 15
    (shell,) = events.of(ToolCallFinished)
    assert shell.is_error and shell.metadata["cancelled"] is True and "cancelled by the user" in shell.content
    results = session.transcript.messages[-2].tool_results
    assert [r.content for r in results][1] == "not run: the session was cancelled"
    assert len(ledger.calls(session_id=session.id)) == 1


@pytest.mark.timeout(60)
def test_cancel_ends_a_retry_wait(workspace, ledger):
    route = scripted_route([CallError("slow down", kind="rate_limited", status=429, retry_after_s=60.0), {"text": "never"}])
    cancel = threading.Event()
    session = Session(route, workspace, ledger=ledger, context=fixed_context,
                      config=SessionConfig(retry=RetryPolicy(max_retry_after_s=120)))
    threading.Timer(0.3, cancel.set).start()
    began = time.monotonic()
    result = Agent(session, cancel=cancel).run("go")
    assert result.status == "cancelled" and time.monotonic() - began < 10
    assert "waiting to retry" in result.detail
    # One request was sent (the 429): one row; the wait that was cancelled sent nothing.
    (row,) = ledger.calls(session_id=session.id)
    assert "slow down" in row.error and row.attempt == 1 and row.state == "done"


def test_approve_hook_is_a_session_parameter_with_a_setter(workspace, ledger):
    asked: list[tuple[str, dict]] = []

    def refuse(tool: str, args: dict) -> bool:
        asked.append((tool, args))
        return False

    route = scripted_route([
        {"tool_calls": [("shell", '{"command": "touch made.txt"}')]}, {"text": "refused"},
        {"tool_calls": [("shell", '{"command": "touch made.txt"}')]}, {"text": "done"},
    ])
    events = EventList()
    session = Session(route, workspace, ledger=ledger, sink=events, context=fixed_context, approve=refuse)
    Agent(session).run("make a file")
    assert asked == [("shell", {"command": "touch made.txt", "timeout_s": 120})] and not (workspace / "made.txt").exists()
    assert events.of(ToolCallFinished)[0].metadata["refused"] is True
    session.approve = lambda tool, args: True
    Agent(session).run("now do")
    assert (workspace / "made.txt").exists() and session.approve is not refuse


def test_call_recorded_carries_the_request_start_time(workspace, ledger):
    route = scripted_route([{"text": "hi"}])
    events = EventList()
    session = Session(route, workspace, ledger=ledger, sink=events, context=fixed_context, clock=lambda: T0)
    Agent(session).run("hello")
    (event,) = events.of(CallRecorded)
    (row,) = ledger.calls(session_id=session.id)
    assert event.started_at == row.started_at == T0
    assert json.loads(event.model_dump_json())["started_at"].startswith("2026-03-04T09:00:00")
