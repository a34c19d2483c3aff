"""`/v1/responses` with the real `openai` SDK: text, streaming (the SDK's own event accumulator),
tool calls round-tripped as function_call / function_call_output items, forced calls, structured
text, usage with cached tokens."""

from __future__ import annotations

import json

import openai
import pytest

from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread

MODEL = "tiny"
TOOLS = [{"type": "function", "name": "run", "description": "Run a command", "parameters": {
    "type": "object", "properties": {"command": {"enum": ["ls", "pwd"]}}, "required": ["command"],
    "additionalProperties": False}}]


@pytest.fixture(scope="module")
def server(tiny_llama_path):
    engine = TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 14)
    with ServerThread(create_app(engine, default_max_tokens=24)) as running:
        yield running


@pytest.fixture
def oa(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)


def test_a_response_matches_chat_completions_and_reports_cached_tokens(oa):
    chat = oa.chat.completions.create(model=MODEL, max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}])
    response = oa.responses.create(model=MODEL, instructions="Be brief.", input="Say hi.", max_output_tokens=8,
                                   temperature=0)
    assert response.object == "response" and response.output_text == chat.choices[0].message.content
    assert response.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    assert response.usage.input_tokens == chat.usage.prompt_tokens
    assert response.usage.input_tokens_details.cached_tokens == chat.usage.prompt_tokens - 1  # same prompt again
    assert response.usage.output_tokens == chat.usage.completion_tokens


def test_streaming_events_accumulate_to_the_same_response(oa):
    whole = oa.responses.create(model=MODEL, input="Tell me about caches.", max_output_tokens=12, temperature=0)
    with oa.responses.stream(model=MODEL, input="Tell me about caches.", max_output_tokens=12,
                             temperature=0) as stream:
        events = list(stream)
    kinds = [event.type for event in events]
    # Cut by max_output_tokens: the stream ends with response.incomplete (the SDK's
    # get_final_response() only accepts response.completed), whose response holds the output.
    assert kinds[-1] == ("response.incomplete" if whole.status == "incomplete" else "response.completed")
    assert kinds[0] == "response.created" and "response.output_text.delta" in kinds
    assert events[-1].response.output_text == whole.output_text
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text
    assert events[-1].response.usage.output_tokens == whole.usage.output_tokens


def test_a_forced_call_then_its_output_round_trip(oa):
    first = oa.responses.create(model=MODEL, input="List the files.", tools=TOOLS, tool_choice="required",
                                max_output_tokens=40, temperature=0)
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "run" and json.loads(call.arguments)["command"] in ("ls", "pwd")
    follow = oa.responses.create(model=MODEL, tools=TOOLS, max_output_tokens=6, temperature=0, input=[
        {"role": "user", "content": "List the files."},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "a.py b.py"},
    ])
    # The reply's exact tokens were remembered: the next turn's prompt hits the cache through it.
    assert follow.usage.input_tokens_details.cached_tokens > first.usage.input_tokens


def test_a_streamed_named_call_arrives_as_a_function_call_item(oa):
    with oa.responses.stream(model=MODEL, input="Where am I?", tools=TOOLS, max_output_tokens=40, temperature=0,
                             tool_choice={"type": "function", "name": "run"}) as stream:
        final = stream.get_final_response()
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert call.name == "run" and json.loads(call.arguments)["command"] in ("ls", "pwd")


def test_text_format_json_schema_validates(oa):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0,
              "maximum": 9}}, "required": ["ok", "n"], "additionalProperties": False}
    response = oa.responses.create(model=MODEL, input="Judge.", max_output_tokens=30, temperature=0, text={
        "format": {"type": "json_schema", "name": "verdict", "schema": schema, "strict": True}})
    value = json.loads(response.output_text)
    assert set(value) == {"ok", "n"} and isinstance(value["ok"], bool) and 0 <= value["n"] <= 9


@pytest.mark.parametrize("extra, fragment", [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"tools": [{"type": "web_search"}]}, "function tools"),
    ({"tool_choice": "required"}, "no tools"),
])
def test_requests_this_server_cannot_honour_are_400(oa, extra, fragment):
    with pytest.raises(openai.BadRequestError, match=fragment):
        oa.responses.create(model=MODEL, input="x", max_output_tokens=4, **extra)
