"""Server details real clients ran into: `/tokenize` with `messages` dropped the assistant's
tool calls (208 tokens counted against 224 `prompt_tokens` for the same conversation), and a forced
`tool_choice` with `text.format` (instructor's RESPONSES_TOOLS mode) was refused with a 400 where
OpenAI accepts it."""

from __future__ import annotations

import httpx
import pytest

from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread
from hitrate.engine.tiny import build_tiny_model

pytestmark = pytest.mark.timeout(120)
MODEL = "tiny"
TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a command.",
                                           "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]
CONVERSATION = [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{\"cmd\": \"ls -la /srv/app\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny-wire"), "llama", vocab_size=512, hidden=64, layers=2,
                            heads=4, kv_heads=2, seed=0)
    engine = TransformersEngine.from_pretrained(path, model_name=MODEL, pool_tokens=1 << 14, page_size=1)
    with ServerThread(create_app(engine, default_max_tokens=8)) as running:
        yield running


def test_tokenize_counts_the_assistants_tool_calls_as_the_chat_endpoint_does(server) -> None:
    counted = httpx.post(server.url + "/tokenize", json={"messages": CONVERSATION, "tools": TOOLS}, timeout=60).json()
    chat = httpx.post(server.url + "/v1/chat/completions", json={"model": MODEL, "messages": CONVERSATION,
                                                                 "tools": TOOLS, "max_tokens": 1}, timeout=60).json()
    assert counted["count"] == chat["usage"]["prompt_tokens"]


def test_a_forced_tool_choice_with_text_format_is_accepted(server) -> None:
    body = {
        "model": MODEL,
        "input": "List the files.",
        "tools": [{"type": "function", **TOOLS[0]["function"]}],
        "tool_choice": {"type": "function", "name": "run"},
        "text": {"format": {"type": "json_schema", "name": "Answer", "schema": {"type": "object"}}},
        "max_output_tokens": 256,
    }
    reply = httpx.post(server.url + "/v1/responses", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    output = reply.json()["output"]
    assert any(item["type"] == "function_call" and item["name"] == "run" for item in output), output
