"""Tool calls through the server with both SDKs: parsed, streamed, round-tripped into a cache hit.

A random model never writes a tool call, so the fixture first teaches a tiny Llama (a few dozen
Adam steps) to answer two fixed prompts with a well-formed and a malformed Hermes tool call.
"""

from __future__ import annotations

import json
import uuid

import anthropic
import openai
import pytest
import torch

from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread

pytestmark = pytest.mark.slow

MODEL = "tiny-tools"
GREEDY = {"extra_body": {"temperature": 0}}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
ANTHROPIC_TOOLS = [{"name": "read_file", "input_schema": {"type": "object"}}]
CALL_PROMPT, CALL_REPLY = "Open the main file.", (
    'Reading it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "src/main.py"}}\n</tool_call>')
BROKEN_PROMPT, BROKEN_REPLY = "Break the call.", '<tool_call>\n{"name": "read_file", "arguments": {"path": }\n</tool_call>'


@pytest.fixture(scope="module")
def tool_model_path(tiny_llama_path, tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path)
    fmt = ChatFormat(tokenizer)
    data = []
    for prompt, reply in ((CALL_PROMPT, CALL_REPLY), (BROKEN_PROMPT, BROKEN_REPLY)):
        ids = fmt.encode([ChatMessage("user", prompt)], OPENAI_TOOLS)
        target = tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        data.append((ids, target))
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(200):
        total = 0.0
        for ids, target in data:
            out = model(input_ids=torch.tensor([ids + target]), labels=torch.tensor([[-100] * len(ids) + target]))
            out.loss.backward()
            total += out.loss.item()
        optimizer.step()
        optimizer.zero_grad()
        if total < 0.05:
            break
    model.eval()
    for ids, target in data:  # the lesson must be exact under greedy decoding
        seq = list(ids)
        with torch.no_grad():
            for _ in target:
                seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
        assert seq[len(ids):] == target, "the tiny model did not learn its tool-call replies"
    out = tmp_path_factory.mktemp("tiny-tools")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def server(tool_model_path):
    engine = TransformersEngine.from_pretrained(tool_model_path, model_name=MODEL, pool_tokens=1 << 14)
    with ServerThread(create_app(engine)) as running:
        yield running


@pytest.fixture
def oa(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0,
                         default_headers={"X-Cache-Salt": uuid.uuid4().hex})


@pytest.fixture
def an(server):
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0,
                               default_headers={"X-Cache-Salt": uuid.uuid4().hex})


def _openai_turn(oa, messages, **kw):
    return oa.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS, temperature=0, **kw)


def test_openai_tool_call_round_trip_hits_the_cache(oa):
    messages = [{"role": "user", "content": CALL_PROMPT}]
    first = _openai_turn(oa, messages, max_tokens=64)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Reading it."
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "src/main.py"}
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "print('hello')"}]
    second = _openai_turn(oa, messages, max_tokens=3)
    assert second.usage.prompt_tokens_details.cached_tokens == (
        first.usage.prompt_tokens + first.usage.completion_tokens - 1)


def test_openai_streamed_tool_call_round_trip_hits_the_cache(oa):
    messages = [{"role": "user", "content": CALL_PROMPT}]
    chunks = list(_openai_turn(oa, messages, max_tokens=64, stream=True, stream_options={"include_usage": True}))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert "<tool_call>" not in content and content.strip() == "Reading it."
    assert finish == ["tool_calls"] and len(calls) == 1
    assert calls[0].index == 0 and calls[0].function.name == "read_file"
    assert json.loads(calls[0].function.arguments) == {"path": "src/main.py"}
    usage = chunks[-1].usage
    messages += [{"role": "assistant", "content": content, "tool_calls": [
                     {"id": calls[0].id, "type": "function",
                      "function": {"name": "read_file", "arguments": calls[0].function.arguments}}]},
                 {"role": "tool", "tool_call_id": calls[0].id, "content": "print('hello')"}]
    second = _openai_turn(oa, messages, max_tokens=3)
    assert second.usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens + usage.completion_tokens - 1


def test_anthropic_tool_use_round_trip_hits_the_cache(an):
    messages = [{"role": "user", "content": CALL_PROMPT}]
    first = an.messages.create(model=MODEL, max_tokens=64, tools=ANTHROPIC_TOOLS, messages=messages, **GREEDY)
    assert first.stop_reason == "tool_use"
    text, tool_use = first.content
    assert text.type == "text" and text.text == "Reading it."
    assert tool_use.type == "tool_use" and tool_use.id.startswith("toolu_")
    assert tool_use.name == "read_file" and tool_use.input == {"path": "src/main.py"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id,
                                               "content": "print('hello')"}]}]
    second = an.messages.create(model=MODEL, max_tokens=3, tools=ANTHROPIC_TOOLS, messages=messages, **GREEDY)
    prompt1 = first.usage.input_tokens + first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == prompt1 + first.usage.output_tokens - 1


def test_anthropic_streamed_tool_use_round_trip_hits_the_cache(an):
    messages = [{"role": "user", "content": CALL_PROMPT}]
    with an.messages.stream(model=MODEL, max_tokens=64, tools=ANTHROPIC_TOOLS, messages=messages, **GREEDY) as s:
        events = [e.type for e in s]
        final = s.get_final_message()
    assert "input_json" in events  # the SDK saw the tool input arrive as an input_json_delta
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"path": "src/main.py"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": final.content[1].id,
                                               "content": "print('hello')"}]}]
    second = an.messages.create(model=MODEL, max_tokens=3, tools=ANTHROPIC_TOOLS, messages=messages, **GREEDY)
    prompt1 = final.usage.input_tokens + final.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == prompt1 + final.usage.output_tokens - 1


def test_malformed_tool_call_comes_back_as_marked_text_in_both_apis(oa, an):
    r = _openai_turn(oa, [{"role": "user", "content": BROKEN_PROMPT}], max_tokens=64)
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls
    content = r.choices[0].message.content
    assert content.startswith("[unparsed tool call: invalid JSON") and BROKEN_REPLY in content
    m = an.messages.create(model=MODEL, max_tokens=64, tools=ANTHROPIC_TOOLS, **GREEDY,
                           messages=[{"role": "user", "content": BROKEN_PROMPT}])
    assert m.stop_reason == "end_turn" and [b.type for b in m.content] == ["text"]
    assert m.content[0].text == content
    with oa.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": BROKEN_PROMPT}],
                                    tools=OPENAI_TOOLS, temperature=0, max_tokens=64, stream=True) as stream:
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed == content


def test_tool_choice_none_leaves_the_call_as_text(oa):
    r = _openai_turn(oa, [{"role": "user", "content": CALL_PROMPT}], max_tokens=64, tool_choice="none")
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == CALL_REPLY
