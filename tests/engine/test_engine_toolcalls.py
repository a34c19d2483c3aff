"""Tool calls parsed out of generated text, in every supported markup, and never a crash."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hitrate.engine.toolcalls import (
    INVALID_TOOL_CALL_MARKER,
    ToolCall,
    ToolCallStreamSplitter,
    parse_tool_calls,
)


def test_hermes_calls_and_surrounding_text():
    text = (
        "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>\n"
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"déjà\", \"n\": 3}}</tool_call>"
    )
    parsed = parse_tool_calls(text, ["read_file", "search"])
    assert parsed.content == "Let me look."
    assert parsed.tool_calls == [
        ToolCall("read_file", {"path": "a.py"}),
        ToolCall("search", {"query": "déjà", "n": 3}),
    ]
    assert parsed.invalid == []
    assert parsed.tool_calls[1].arguments_json() == '{"query": "déjà", "n": 3}'


def test_hermes_arguments_as_string_parameters_key_and_unclosed_final_block():
    parsed = parse_tool_calls('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>')
    assert parsed.tool_calls == [ToolCall("f", {"x": 1})]
    parsed = parse_tool_calls('<tool_call>{"name": "f", "parameters": {"y": [1, 2]}}')  # stopped before </tool_call>
    assert parsed.tool_calls == [ToolCall("f", {"y": [1, 2]})]
    assert parsed.content == ""


def test_malformed_json_is_kept_as_marked_text():
    raw = '<tool_call>\n{"name": "f", "arguments": {"x": 1,}}\n</tool_call>'
    parsed = parse_tool_calls("Trying.\n" + raw + "\nafter")
    assert parsed.tool_calls == []
    assert len(parsed.invalid) == 1 and "invalid JSON" in parsed.invalid[0]
    assert parsed.content.startswith("Trying.\n" + INVALID_TOOL_CALL_MARKER.split("{")[0])
    assert raw in parsed.content and parsed.content.endswith("after")


def test_one_bad_call_does_not_lose_the_good_ones():
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"nam": "b"}</tool_call>'
    parsed = parse_tool_calls(text)
    assert parsed.tool_calls == [ToolCall("a", {})]
    assert parsed.invalid == ['missing "name"']
    assert '{"nam": "b"}' in parsed.content


def test_unknown_tool_name_is_not_handed_out_as_a_call():
    parsed = parse_tool_calls('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', ["read_file"])
    assert parsed.tool_calls == []
    assert "no tool named 'rm_rf'" in parsed.invalid[0]


def test_arguments_that_are_not_an_object_are_invalid():
    parsed = parse_tool_calls('<tool_call>{"name": "f", "arguments": [1]}</tool_call>')
    assert parsed.tool_calls == [] and "JSON object" in parsed.invalid[0]


def test_qwen3_coder_xml_calls():
    text = (
        "<tool_call>\n<function=run>\n<parameter=command>\npytest -q\n</parameter>\n"
        "<parameter=timeout>\n30\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse_tool_calls(text, ["run"])
    assert parsed.tool_calls == [ToolCall("run", {"command": "pytest -q", "timeout": 30})]


def test_mistral_formats():
    old = 'ok[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]'
    parsed = parse_tool_calls(old)
    assert parsed.content == "ok"
    assert [c.name for c in parsed.tool_calls] == ["f", "g"]
    new = '[TOOL_CALLS]f[ARGS]{"a": 2}[TOOL_CALLS]g[ARGS]{}'
    assert parse_tool_calls(new).tool_calls == [ToolCall("f", {"a": 2}), ToolCall("g", {})]
    broken = parse_tool_calls('[TOOL_CALLS][{"name": "f", ')
    assert broken.tool_calls == [] and broken.invalid and "[TOOL_CALLS]" in broken.content


def test_llama_python_tag_and_bare_json_only_with_known_tools():
    tagged = parse_tool_calls('<|python_tag|>{"name": "f", "parameters": {"q": 1}}', ["f"])
    assert tagged.tool_calls == [ToolCall("f", {"q": 1})]
    bare = '{"name": "f", "parameters": {"q": 1}}'
    assert parse_tool_calls(bare, ["f"]).tool_calls == [ToolCall("f", {"q": 1})]
    # Without tools, or for a name that is no tool, a JSON answer is just an answer.
    assert parse_tool_calls(bare).content == bare and parse_tool_calls(bare).tool_calls == []
    assert parse_tool_calls('{"name": "Ada", "age": 36}', ["f"]).tool_calls == []


def test_plain_text_passes_through():
    parsed = parse_tool_calls("  just words  ")
    assert parsed.content == "just words" and parsed.tool_calls == [] and parsed.invalid == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list('<>{}[]"/:, _abnmeotl|\n') + ["<tool_call>", "</tool_call>", "[TOOL_CALLS]",
                                                                   "<|python_tag|>", '{"name": "a"', "[ARGS]"]))
       .map("".join))
def test_parser_never_raises(text):
    parsed = parse_tool_calls(text, ["a"])
    assert isinstance(parsed.content, str)
    for call in parsed.tool_calls:
        json.dumps(call.arguments)


def _stream(text: str, pieces: list[int], tools: bool = True) -> tuple[str, object]:
    splitter = ToolCallStreamSplitter(tools_offered=tools)
    out, pos = [], 0
    for size in pieces:
        out.append(splitter.feed(text[pos : pos + size]))
        pos += size
    out.append(splitter.feed(text[pos:]))
    tail = splitter.finish(["f"])
    return "".join(out) + tail.content, tail


def test_stream_splitter_holds_calls_back_even_when_the_marker_is_split():
    text = 'Sure.<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
    for cut in range(1, 12):
        shown, tail = _stream(text, [cut, 2, 3, 5])
        assert shown == "Sure."
        assert tail.tool_calls == [ToolCall("f", {"x": 1})]


def test_stream_splitter_releases_a_false_alarm():
    shown, tail = _stream("a <tool_ b", [3, 4])
    assert shown == "a <tool_ b" and tail.tool_calls == []
    shown, tail = _stream('{"answer": 42}', [4], tools=True)
    assert shown == '{"answer": 42}' and tail.tool_calls == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("ab <>/{}\n") + ["<tool_call>", "</tool_call>"]), max_size=40).map("".join),
       st.lists(st.integers(1, 6), max_size=10))
def test_stream_splitter_loses_no_text_when_nothing_is_a_call(text, pieces):
    shown, tail = _stream(text, pieces)
    if not tail.tool_calls and not tail.invalid:
        assert shown == text
