"""The tool-call parser on replies real models wrote (tests/fixtures/model_outputs/, captured by
benchmarks/capture_tool_replies.py): the calls read from each reply are the ones a person reading
it found, a streamed reply split at every offset ends the same, and the server hands the same
calls to the OpenAI and Anthropic SDKs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hitrate.engine.toolcalls import ToolCallStreamSplitter, parse_tool_calls

# Captures of single replies (other files in the folder record whole sessions); a reply counts once
# a person has read it and written down its calls (`expected_calls`).
CAPTURES = {path.stem: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted((Path(__file__).parents[1] / "fixtures" / "model_outputs").glob("*.json"))}
CAPTURES = {name: data for name, data in CAPTURES.items() if isinstance(data, dict) and "replies" in data}
REPLIES = [(name, i, reply, data["prompts"][reply["scenario"]]["tools"])
           for name, data in CAPTURES.items()
           for i, reply in enumerate(data["replies"]) if "expected_calls" in reply]


def test_fixtures_cover_the_shapes_small_models_write():
    assert len(CAPTURES) >= 1 and len(REPLIES) >= 10
    shapes = " | ".join(r["shape"] for _, _, r, _ in REPLIES)
    for shape in ("fenced json call", "bare call", "naming the task's function", "prose"):
        assert shape in shapes


@pytest.mark.parametrize("model, index, reply, tools", REPLIES, ids=[f"{m}-{i}" for m, i, _, _ in REPLIES])
def test_calls_read_from_each_real_reply(model, index, reply, tools):
    parsed = parse_tool_calls(reply["text"], tools)
    assert [[c.name, c.arguments] for c in parsed.tool_calls] == reply["expected_calls"], reply["text"]
    assert parsed.invalid == []
    if not reply["expected_calls"]:
        assert parsed.content == reply["text"].strip()  # not a call: the reply as written


@pytest.mark.parametrize("model, index, reply, tools", REPLIES, ids=[f"{m}-{i}" for m, i, _, _ in REPLIES])
def test_each_real_reply_streams_to_the_same_result_at_every_split(model, index, reply, tools):
    text = reply["text"]
    whole = parse_tool_calls(text, tools)
    for cut in range(len(text) + 1):
        splitter = ToolCallStreamSplitter(tools)
        shown = splitter.feed(text[:cut]) + splitter.feed(text[cut:])
        tail = splitter.finish()
        assert shown + tail.content == whole.content and tail.tool_calls == whole.tool_calls, cut
        assert not any(json.dumps(c.arguments) in shown for c in whole.tool_calls if c.arguments)


@pytest.fixture(scope="module")
def server(tiny_qwen2_path):
    from transformers import AutoTokenizer

    from hitrate.engine.server import create_app
    from hitrate.engine.server_thread import ServerThread
    from tests.engine.scripted_engine import ScriptedEngine

    texts = {f"[{m}-{i}]": r["text"] for m, i, r, _ in REPLIES}

    def script(prompt: str) -> str:
        asked = prompt.rsplit("<|im_start|>user", 1)[-1]
        return next(text for key, text in texts.items() if key in asked)

    with ServerThread(create_app(ScriptedEngine(AutoTokenizer.from_pretrained(tiny_qwen2_path), script))) as running:
        yield running


@pytest.mark.slow
def test_real_replies_through_the_sdks(server):
    import anthropic
    import openai

    oa = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    an = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    for model, i, reply, names in REPLIES:
        tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]
        messages = [{"role": "user", "content": f"[{model}-{i}]"}]
        expected = reply["expected_calls"]
        r = oa.chat.completions.create(model="scripted", messages=messages, tools=tools, max_tokens=1000)
        assert [[c.function.name, json.loads(c.function.arguments)] for c in r.choices[0].message.tool_calls or []] \
            == expected
        chunks = list(oa.chat.completions.create(model="scripted", messages=messages, tools=tools, max_tokens=1000,
                                                 stream=True))
        streamed = [[d.function.name, json.loads(d.function.arguments)]
                    for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
        assert streamed == expected
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (r.choices[0].message.content or "")
        m = an.messages.create(model="scripted", max_tokens=1000, messages=messages,
                               tools=[{"name": n, "input_schema": {"type": "object"}} for n in names])
        assert [[b.name, b.input] for b in m.content if b.type == "tool_use"] == expected
