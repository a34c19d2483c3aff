"""Structured output and forced tool calls through llguidance, with the real `openai` and
`anthropic` SDKs on a random tiny Llama: whatever the weights, the reply validates against the
schema, a forced call names an offered tool with arguments that fit its parameters, and Anthropic
`thinking` is accepted and said to be ignored."""

from __future__ import annotations

import json
from typing import Literal

import anthropic
import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import NOTICE_HEADER, create_app
from hitrate.engine.server_thread import ServerThread

MODEL = "tiny"
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string", "maxLength": 12}}, "required": ["path"],
        "additionalProperties": False}}},
    {"type": "function", "function": {"name": "run", "parameters": {
        "type": "object", "properties": {"command": {"enum": ["ls", "pwd", "pytest"]}}, "required": ["command"],
        "additionalProperties": False}}},
]
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS]


class Verdict(BaseModel):
    color: Literal["red", "green", "blue"]
    count: int = Field(ge=0, le=99)
    ok: bool
    label: str = Field(max_length=8)


@pytest.fixture(scope="module")
def server(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 14)
    with ServerThread(create_app(engine)) as running:
        yield running


@pytest.fixture
def oa(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)


@pytest.fixture
def an(server):
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)


USER = [{"role": "user", "content": "Judge the build."}]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_json_schema_output_validates_against_the_schema(oa, seed):
    completion = oa.chat.completions.parse(model=MODEL, messages=USER, response_format=Verdict, max_tokens=80,
                                           temperature=1.0, seed=seed)
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, Verdict)  # the SDK validated it with pydantic
    Verdict.model_validate_json(choice.message.content)


@pytest.mark.parametrize("seed", [3, 7])  # seeds whose random-weight strings close within the budget
def test_json_object_output_is_a_json_object(oa, seed):
    reply = oa.chat.completions.create(model=MODEL, messages=USER, response_format={"type": "json_object"},
                                       max_tokens=200, temperature=1.0, seed=seed)
    assert reply.choices[0].finish_reason == "stop"
    value = json.loads(reply.choices[0].message.content)
    assert isinstance(value, dict) and value


def test_tool_choice_required_makes_a_call_to_an_offered_tool(oa):
    reply = oa.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS, tool_choice="required",
                                       max_tokens=80, temperature=0)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    args = json.loads(call.function.arguments)
    if call.function.name == "run":
        assert args["command"] in ("ls", "pwd", "pytest")
    else:
        assert call.function.name == "read_file" and len(args["path"]) <= 12


def test_a_named_tool_choice_calls_that_tool_streaming_too(oa):
    choice = {"type": "function", "function": {"name": "run"}}
    reply = oa.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS, tool_choice=choice, max_tokens=80,
                                       temperature=0)
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "run" and json.loads(call.function.arguments)["command"] in ("ls", "pwd", "pytest")
    chunks = list(oa.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS, tool_choice=choice,
                                             max_tokens=80, temperature=0, stream=True))
    streamed = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert streamed and streamed[0].function.name == "run"
    assert json.loads("".join(d.function.arguments or "" for d in streamed)) == json.loads(call.function.arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_tool_choice_naming_an_unknown_tool_is_400(oa):
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        oa.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS, max_tokens=8,
                                   tool_choice={"type": "function", "function": {"name": "deploy"}})


@pytest.mark.parametrize("choice", [{"type": "tool", "name": "run"}, {"type": "any"}])
def test_anthropic_tool_choice_any_and_tool_force_a_call(an, choice):
    message = an.messages.create(model=MODEL, max_tokens=80, messages=USER, tools=ANTHROPIC_TOOLS,
                                 tool_choice=choice, extra_body={"temperature": 0})
    assert message.stop_reason == "tool_use"
    (block,) = [b for b in message.content if b.type == "tool_use"]
    assert block.name in ("run", "read_file") and isinstance(block.input, dict)
    if choice["type"] == "tool":
        assert block.name == "run" and block.input["command"] in ("ls", "pwd", "pytest")


def test_anthropic_output_format_json_schema_validates(an):
    schema = {**Verdict.model_json_schema(), "additionalProperties": False}  # as Anthropic requires
    message = an.messages.create(model=MODEL, max_tokens=80, messages=USER, extra_body={
        "temperature": 0, "output_config": {"format": {"type": "json_schema", "schema": schema}}})
    Verdict.model_validate_json(message.content[0].text)


def test_anthropic_thinking_is_accepted_and_said_to_be_ignored(an, server):
    raw = an.messages.with_raw_response.create(model=MODEL, max_tokens=4, messages=USER,
                                               thinking={"type": "enabled", "budget_tokens": 1024})
    message = raw.parse()
    assert all(b.type != "thinking" for b in message.content)
    assert "thinking ignored" in raw.headers[NOTICE_HEADER]
    body = {"model": MODEL, "max_tokens": 4, "messages": USER, "stream": True, "thinking": {"type": "adaptive"}}
    with httpx.stream("POST", server.url + "/v1/messages", json=body) as response:
        assert response.status_code == 200 and NOTICE_HEADER in response.headers
        assert "message_stop" in response.read().decode()


# ---------------------------------------------------------------- tool_choice "auto" held to well-formed calls

AUTO_TOOLS = [TOOLS[0], {"type": "function", "function": {"name": "shell", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
    "required": ["command"]}}}]


def _accepted(grammar: str, tokenizer, text: str) -> bool:
    import llguidance
    import llguidance.hf

    matcher = llguidance.LLMatcher(llguidance.hf.from_tokenizer(tokenizer), grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return all(matcher.consume_token(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]) \
        and matcher.is_accepting()


@pytest.mark.parametrize("text, allowed", [
    ("Lists are mutable; tuples are not.\nThat is all.", True),
    ("Here is the fix:\n```python\nx = 1\n```\nRun the tests.", True),
    ("```diff\n-a\n+b\n```", True),
    ('I will read it.\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```', True),
    ('<tool_call>\n{"name": "shell", "arguments": {"command": "pytest -q"}}\n</tool_call>', True),
    ('```json\n{"name": "shell", "arguments": {"command": "ls"}}\n```\n```json\n'
     '{"name": "read_file", "arguments": {"path": "a"}}\n```', True),
    ("Two lines.\nOf prose.\n```json\n{\"not\": \"a call\"}\n```", True),  # JSON further into prose is free
    # what small models write when a call goes wrong
    ('```json\n{"name": "from_roman", "arguments": {"text": "XIV"}}\n```', False),
    ('I will call it.\n```json\n{"name": "deep_merge", "arguments": {}}\n```', False),
    ('{"name": "shell", "arguments": {"command": "ls"}}', False),  # bare: the grammar asks for a fence
    ('```json\n{"name": "read_file", "arguments": {"path": "a-very-long-path.py"}}\n```', False),  # maxLength 12
    ('<tool_call>\n{"name": "shell", "arguments": {}}\n</tool_call>', False),  # "command" is required
    ('```json\n{"name": "shell", "arguments": {"command": "ls", "timeout": 30}}\n```', True),
    ('```json\n{"name": "shell", "arguments": {"command": "ls", "timeout": 10000000000000000}}\n```', False),
])
def test_auto_tool_grammar_allows_prose_and_well_formed_calls_only(tiny_qwen2_path, text, allowed):
    from transformers import AutoTokenizer

    from hitrate.engine.constraints import auto_tool_grammar

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen2_path)
    assert _accepted(auto_tool_grammar(AUTO_TOOLS, tokenizer), tokenizer, text) is allowed


def test_tool_grammar_on_a_server_keeps_every_sampled_call_valid(tiny_llama_path):
    import jsonschema

    from hitrate.engine.chat import ChatMessage
    from hitrate.engine.serving import ChatRequest, ChatService
    from hitrate.engine.toolcalls import parse_tool_calls

    engine = TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 14)
    service = ChatService(engine, tool_grammar=True)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in AUTO_TOOLS}
    for seed in range(6):
        reply = service.run(ChatRequest(messages=[ChatMessage("user", "Read roman.py")], tools=AUTO_TOOLS,
                                        temperature=1.0, seed=seed, max_tokens=60))
        text = reply.result.text
        assert not text.lstrip().startswith("{")
        for call in reply.tool_calls:
            jsonschema.validate(call.arguments, schemas[call.name])
        assert parse_tool_calls(text, list(schemas)).tool_calls == [c.__class__(c.name, c.arguments) for c in reply.tool_calls]


def test_a_schema_the_grammar_cannot_hold_runs_unconstrained_with_a_notice(tiny_llama_path):
    from hitrate.engine.chat import ChatMessage
    from hitrate.engine.serving import ChatRequest, ChatService

    engine = TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 14)
    odd = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)a"}}}}}]
    prepared = ChatService(engine, tool_grammar=True).prepare(
        ChatRequest(messages=[ChatMessage("user", "hi")], tools=odd, max_tokens=4))
    assert prepared.generation.grammar is None
    assert prepared.request.notices and "tool grammar off" in prepared.request.notices[0]
    fine = ChatService(engine, tool_grammar=True).prepare(
        ChatRequest(messages=[ChatMessage("user", "hi")], tools=AUTO_TOOLS, max_tokens=4))
    assert fine.generation.grammar is not None and not fine.request.notices
    assert ChatService(engine).prepare(
        ChatRequest(messages=[ChatMessage("user", "hi")], tools=AUTO_TOOLS, max_tokens=4)).generation.grammar is None
