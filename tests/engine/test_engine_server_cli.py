"""`hitrate serve MODEL` as a real process: it serves the OpenAI and Anthropic endpoints, and a model
that cannot be loaded is a clear error, not a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

pytestmark = pytest.mark.slow

HITRATE = str(Path(sys.executable).with_name("hitrate"))
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("form", ["folder", "gguf"])
def test_serve_command_answers_both_sdks(tiny_llama_path, tmp_path, form):
    from hitrate.engine.tiny import write_tiny_gguf

    model = tiny_llama_path if form == "folder" else write_tiny_gguf(tiny_llama_path, tmp_path / "tiny.gguf")
    port = _free_port()
    proc = subprocess.Popen(
        [HITRATE, "serve", str(model), "--port", str(port), "--pool-tokens", "8192",
         "--served-model-name", "local", "--log-level", "warning", "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=OFFLINE,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                if health.status_code == 200:
                    break
                assert health.status_code == 503 and health.json()["status"] == "loading"  # answered, not hung
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        base = f"http://127.0.0.1:{port}"
        reply = openai.OpenAI(base_url=base + "/v1", api_key="x").chat.completions.create(
            model="local", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        assert reply.usage.completion_tokens >= 1
        message = anthropic.Anthropic(base_url=base, api_key="x").messages.create(
            model="local", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
        assert message.usage.cache_read_input_tokens == reply.usage.prompt_tokens - 1  # same prompt, now cached
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
    assert f"serving local on http://127.0.0.1:{port}" in output
    assert "load: read" in output and "load: check" in output and "load: ready" in output
    assert "threads 1 (--threads)" in output


def test_serve_command_reports_a_model_it_cannot_load(tmp_path):
    result = subprocess.run([HITRATE, "serve", str(tmp_path / "no-such-model"), "--local-files-only"],
                            capture_output=True, text=True, env=OFFLINE, timeout=180)
    assert result.returncode == 2
    assert "error: could not load model" in result.stderr
    assert "Traceback" not in result.stderr
