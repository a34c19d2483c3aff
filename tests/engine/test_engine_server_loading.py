"""While the model loads the port answers: `/health` says 503 "loading" with the stage under way,
every other route 503 in its API's error shape; once loaded, the same socket serves the engine; a
load that fails stops the server with its error (`engine.server_loading`)."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from hitrate.engine.api import EngineError
from hitrate.engine.load_progress import LoadProgress
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_loading import RETRY_AFTER_S, LoadingServer


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


def wait_until_serving(server: LoadingServer) -> None:
    for _ in range(3000):
        if server.server.started:
            return
        threading.Event().wait(0.01)
    raise AssertionError("the server did not start")


def test_health_answers_loading_until_the_model_is_in_then_the_engine_serves(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, pool_tokens=4096)
    released, stage_entered = threading.Event(), threading.Event()
    progress = LoadProgress()

    def load():  # a load held in its "read" stage until the test lets it go
        with progress.timed("read", nbytes=123):
            stage_entered.set()
            assert released.wait(60)
        return engine

    ready = []
    sock = listening_socket()
    url = "http://127.0.0.1:%d" % sock.getsockname()[1]
    server = LoadingServer(load, create_app, sock=sock, progress=progress, on_ready=ready.append, log_level="warning")
    outcome = []
    runner = threading.Thread(target=lambda: outcome.append(server.run()), daemon=True)
    runner.start()
    try:
        wait_until_serving(server)
        assert stage_entered.wait(30)
        with httpx.Client(base_url=url, timeout=10) as client:
            health = client.get("/health")
            assert health.status_code == 503 and health.headers["retry-after"] == str(RETRY_AFTER_S)
            assert health.json()["status"] == "loading" and health.json()["stage"] == "read"
            chat = client.post("/v1/chat/completions", json={"model": "x", "messages": [{"role": "user", "content": "hi"}]})
            assert chat.status_code == 503 and chat.json()["error"]["code"] == "model_loading"
            assert "still loading (read)" in chat.json()["error"]["message"]
            message = client.post("/v1/messages", json={"model": "x", "max_tokens": 2, "messages": []})
            assert message.status_code == 503 and message.json()["type"] == "error"
            assert not ready
            released.set()
            assert server.ready.wait(30) and ready == [engine]
            health = client.get("/health")
            assert health.status_code == 200 and health.json()["status"] == "ok"
            reply = client.post("/v1/chat/completions", json={
                "model": engine.model_name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
            assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
        assert [stage.name for stage in progress.stages] == ["read"] and progress.stages[0].nbytes == 123
    finally:
        released.set()
        server.stop()
        runner.join(30)
        sock.close()
    assert outcome == [engine]


def test_a_load_that_fails_stops_the_server_with_its_error():
    sock = listening_socket()

    def load():
        raise EngineError("could not load model 'missing.gguf': no GGUF file")

    server = LoadingServer(load, create_app, sock=sock, log_level="warning")
    try:
        with pytest.raises(EngineError, match="no GGUF file"):
            server.run()  # returns once the failed load has stopped uvicorn
    finally:
        sock.close()
    assert server.ready.is_set() and server.engine is None


def test_each_stage_prints_its_size_and_seconds_and_a_failed_stage_none():
    import io

    ticks = iter([0.0, 1.0, 3.5, 4.0, 9.0])
    out = io.StringIO()
    progress = LoadProgress(out, clock=lambda: next(ticks))
    with progress.timed("read", nbytes=491_400_064) as info:
        assert progress.current == "read"
        info["detail"] = "model.gguf"
    with pytest.raises(ValueError):
        with progress.timed("pack"):
            raise ValueError("no room")
    progress.ready("threads 1")
    assert progress.current is None and [s.name for s in progress.stages] == ["read", "ready"]
    assert out.getvalue().splitlines() == [
        "load: read       2.5 s  491.40 MB  model.gguf",
        "load: ready      9.0 s  threads 1",
    ]
    assert progress.seconds("read") == 2.5 and progress.seconds("tuning") == 0
