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


# ---------------------------------------------------------------- every format a model writes, through both SDKs

from tests.engine.scripted_engine import ScriptedEngine  # noqa: E402

from hitrate.engine.sampling_defaults import SamplingDefaults  # noqa: E402
from hitrate.engine.serving import ChatService  # noqa: E402

SHELL = {"type": "function", "function": {"name": "shell", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
READ = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
FORMAT_TOOLS = [READ, SHELL]
FORMAT_TOOLS_ANTHROPIC = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in FORMAT_TOOLS]
# (the prompt word that selects the reply, the reply, the prose expected, the calls expected)
FORMATS = {
    "fenced": ('To fix it I need to see the file.\n\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```',
               "To fix it I need to see the file.", [("read_file", {"path": "roman.py"})]),
    "bare": ('{"name": "shell", "arguments": "{\\"command\\": \\"pytest -q\\"}"}', "",
             [("shell", {"command": "pytest -q"})]),
    "hermes": ('<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n<tool_call>\n'
               '{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>', "",
               [("read_file", {"path": "a.py"}), ("shell", {"command": "ls"})]),
    "llama": ('<|python_tag|>{"name": "shell", "parameters": {"command": "ls"}}', "", [("shell", {"command": "ls"})]),
    "mistral": ('[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "b.py"}}]', "",
                [("read_file", {"path": "b.py"})]),
    "undeclared": ('```json\n{"name": "from_roman", "arguments": {"text": "XIV"}}\n```',
                   '```json\n{"name": "from_roman", "arguments": {"text": "XIV"}}\n```', []),
    "prose": ("Lists are mutable; tuples are not.", "Lists are mutable; tuples are not.", []),
}


@pytest.fixture(scope="module")
def scripted(tiny_qwen2_path):
    from transformers import AutoTokenizer

    def script(prompt: str) -> str:
        asked = prompt.rsplit("<|im_start|>user", 1)[-1]
        return next(reply for key, (reply, _, _) in FORMATS.items() if f"[{key}]" in asked)

    engine = ScriptedEngine(AutoTokenizer.from_pretrained(tiny_qwen2_path), script)
    service = ChatService(engine, sampling=SamplingDefaults(temperature=0.7, top_p=0.8, top_k=20, source="test"))
    with ServerThread(create_app(engine, service=service)) as running:
        yield engine, running


def _clients(server):
    oa = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    an = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    return oa, an


@pytest.mark.parametrize("kind", list(FORMATS))
def test_every_format_becomes_calls_on_openai_chat_streamed_or_not(scripted, kind):
    engine, server = scripted
    oa, _ = _clients(server)
    _, prose, calls = FORMATS[kind]
    messages = [{"role": "user", "content": f"[{kind}] go"}]
    r = oa.chat.completions.create(model="scripted", messages=messages, tools=FORMAT_TOOLS)
    message = r.choices[0].message
    got = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    assert got == calls and (message.content or "") == prose
    assert r.choices[0].finish_reason == ("tool_calls" if calls else "stop")
    chunks = list(oa.chat.completions.create(model="scripted", messages=messages, tools=FORMAT_TOOLS, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    deltas = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert content == prose
    assert [(d.function.name, json.loads(d.function.arguments)) for d in deltas] == calls
    assert [d.index for d in deltas] == list(range(len(calls)))


@pytest.mark.parametrize("kind", ["fenced", "bare", "hermes", "undeclared"])
def test_every_format_becomes_tool_use_on_anthropic_streamed_or_not(scripted, kind):
    _, server = scripted
    _, an = _clients(server)
    _, prose, calls = FORMATS[kind]
    messages = [{"role": "user", "content": f"[{kind}] go"}]
    m = an.messages.create(model="scripted", max_tokens=200, tools=FORMAT_TOOLS_ANTHROPIC, messages=messages)
    assert [(b.name, b.input) for b in m.content if b.type == "tool_use"] == calls
    assert "".join(b.text for b in m.content if b.type == "text") == prose
    assert m.stop_reason == ("tool_use" if calls else "end_turn")
    with an.messages.stream(model="scripted", max_tokens=200, tools=FORMAT_TOOLS_ANTHROPIC, messages=messages) as s:
        final = s.get_final_message()
    assert [(b.name, b.input) for b in final.content if b.type == "tool_use"] == calls
    assert "".join(b.text for b in final.content if b.type == "text") == prose


@pytest.mark.parametrize("kind", ["fenced", "bare", "undeclared"])
def test_every_format_becomes_function_calls_on_openai_responses_streamed_or_not(scripted, kind):
    _, server = scripted
    oa, _ = _clients(server)
    _, prose, calls = FORMATS[kind]
    tools = [{"type": "function", **t["function"]} for t in FORMAT_TOOLS]
    r = oa.responses.create(model="scripted", input=f"[{kind}] go", tools=tools)
    assert [(o.name, json.loads(o.arguments)) for o in r.output if o.type == "function_call"] == calls
    assert r.output_text == prose
    with oa.responses.stream(model="scripted", input=f"[{kind}] go", tools=tools) as s:
        final = s.get_final_response()
    assert [(o.name, json.loads(o.arguments)) for o in final.output if o.type == "function_call"] == calls
    assert final.output_text == prose


def test_sampling_defaults_fill_what_a_request_leaves_out_and_top_k_is_accepted(scripted):
    engine, server = scripted
    oa, an = _clients(server)
    messages = [{"role": "user", "content": "[prose] hi"}]
    oa.chat.completions.create(model="scripted", messages=messages)
    p = engine.requests[-1].params
    assert (p.temperature, p.top_p, p.top_k, p.min_p) == (0.7, 0.8, 20, 0.0)
    oa.chat.completions.create(model="scripted", messages=messages, temperature=0.2,
                               extra_body={"top_k": 5, "min_p": 0.05})
    p = engine.requests[-1].params
    assert (p.temperature, p.top_p, p.top_k, p.min_p) == (0.2, 0.8, 5, 0.05)
    an.messages.create(model="scripted", max_tokens=20, messages=messages, extra_body={"top_k": 3})
    assert (engine.requests[-1].params.top_k, engine.requests[-1].params.temperature) == (3, 0.7)
    oa.chat.completions.create(model="scripted", messages=messages, extra_body={"top_k": -1})
    assert engine.requests[-1].params.top_k == 0  # vLLM's "no cut"
