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


def _stream(text: str, pieces: list[int], names: list[str] | None = ("f",)) -> tuple[str, object]:
    splitter = ToolCallStreamSplitter(names)
    out, pos = [], 0
    for size in pieces:
        out.append(splitter.feed(text[pos : pos + size]))
        pos += size
    out.append(splitter.feed(text[pos:]))
    tail = splitter.finish()
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
    shown, tail = _stream('{"answer": 42}', [4])
    assert shown == '{"answer": 42}' and tail.tool_calls == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("ab <>/{}\n") + ["<tool_call>", "</tool_call>"]), max_size=40).map("".join),
       st.lists(st.integers(1, 6), max_size=10))
def test_stream_splitter_loses_no_text_when_nothing_is_a_call(text, pieces):
    shown, tail = _stream(text, pieces)
    if not tail.tool_calls and not tail.invalid:
        assert shown == text.strip()


# ---------------------------------------------------------------- plain JSON calls (fenced, bare)

TOOLS = ["read_file", "shell", "list_dir"]
READ = ToolCall("read_file", {"path": "roman.py"})


def test_fenced_json_call_after_a_sentence():
    text = 'To fix it, I will read the file first.\n\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```'
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [READ]
    assert parsed.content == "To fix it, I will read the file first." and parsed.invalid == []


def test_fence_without_language_parameters_key_and_arguments_as_a_string():
    text = '```\n{"name": "read_file", "parameters": {"path": "roman.py"}}\n```'
    assert parse_tool_calls(text, TOOLS).tool_calls == [READ]
    text = '```json\n{"name": "read_file", "arguments": "{\\"path\\": \\"roman.py\\"}"}\n```'
    assert parse_tool_calls(text, TOOLS).tool_calls == [READ]
    text = '```JSON\n{"type": "function", "name": "read_file", "parameters": {"path": "roman.py"}}\n```'
    assert parse_tool_calls(text, TOOLS).tool_calls == [READ]


def test_several_fenced_calls_with_prose_between_and_after():
    text = ('First the file.\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```\n'
            'Then the tests.\n```json\n[{"name": "shell", "arguments": {"command": "pytest -q"}},\n'
            ' {"name": "list_dir", "arguments": {}}]\n```\nThat shows what fails.')
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.tool_calls] == ["read_file", "shell", "list_dir"]
    assert parsed.content == "First the file.\n\nThen the tests.\n\nThat shows what fails."


def test_several_objects_in_one_fence_and_an_unclosed_final_fence():
    text = ('```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n'
            '{"name": "shell", "arguments": {"command": "ls"}}')
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [READ, ToolCall("shell", {"command": "ls"})] and parsed.content == ""


def test_a_fence_inside_a_string_argument_does_not_end_the_call():
    content = "# Title\n\n```python\nprint(1)\n```\n"
    text = "```json\n" + json.dumps({"name": "read_file", "arguments": {"path": content}}) + "\n```"
    assert parse_tool_calls(text, TOOLS).tool_calls == [ToolCall("read_file", {"path": content})]


def test_bare_calls_after_prose_run_to_the_end():
    text = 'I will list the folder.\n{"name": "list_dir", "arguments": {"path": "."}}\n'
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [ToolCall("list_dir", {"path": "."})] and parsed.content == "I will list the folder."
    two = '{"name": "list_dir", "arguments": {}};\n{"name": "read_file", "arguments": {"path": "roman.py"}}'
    assert [c.name for c in parse_tool_calls(two, TOOLS).tool_calls] == ["list_dir", "read_file"]


def test_json_after_bare_calls_stays_content_and_a_cut_off_object_too():
    # Replies of Qwen2.5-Coder-0.5B (tests/fixtures/model_outputs): a call, then an imagined result
    # or calls to the task's own function, until the token limit.
    text = '{"name": "read_file", "arguments": {"path": "roman.py"}}\n{"response": 2}'
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [READ] and parsed.content == '{"response": 2}'
    text = ('{"name": "list_dir", "arguments": {"path": "."}}\n{"name": "from_roman", "arguments": {"text": "IV"}}\n'
            '{"name": "read_file", "arguments": {"path": "roman.py"}}\n{"name": "from_roman", "argu')
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [ToolCall("list_dir", {"path": "."}), READ]
    assert parsed.content == '{"name": "from_roman", "arguments": {"text": "IV"}}\n\n{"name": "from_roman", "argu'


def test_json_that_is_not_a_call_to_a_declared_tool_stays_text():
    cases = [
        # the task's own function, not a tool: stays text, nothing marked
        '```json\n{"name": "from_roman", "arguments": {"text": "XIV"}}\n```',
        '{"name": "from_roman", "arguments": {"text": "XIV"}}',
        # ordinary JSON answers
        '{"name": "read_file", "size": 3}',
        '{"name": "Ada", "age": 36}',
        '```json\n{"answer": 42}\n```',
        # a run of JSON that does not open with a call
        '{"response": 2}\n{"name": "from_roman", "arguments": {"text": "IV"}}',
        # an example inside an explanation: prose after a bare object
        'Call it like this:\n{"name": "read_file", "arguments": {"path": "a"}}\nand it returns the text.',
        # another language, or an object in the middle of a line
        '```python\n{"name": "read_file", "arguments": {"path": "a"}}\n```',
        'The call was {"name": "read_file", "arguments": {"path": "a"}}',
        # a name that is not a string
        '{"name": {"read_file": 1}, "arguments": {}}',
        '```json\n{"name": ["read_file"], "arguments": {}}\n```',
        # broken JSON
        '```json\n{"name": "read_file", "arguments": {"path": }}\n```',
        # arguments that are not an object, or both keys
        '{"name": "read_file", "arguments": [1]}',
        '{"name": "read_file", "arguments": {}, "parameters": {}}',
    ]
    for text in cases:
        parsed = parse_tool_calls(text, TOOLS)
        assert parsed.tool_calls == [] and parsed.invalid == [], text
        assert parsed.content == text.strip()


def test_plain_json_is_not_looked_for_without_declared_tools():
    text = '```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```'
    assert parse_tool_calls(text).tool_calls == [] and parse_tool_calls(text, []).tool_calls == []


def test_the_end_of_a_python_block_does_not_open_a_call_fence():
    text = '```python\nx = 1\n```\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```'
    # The third fence closes nothing the model opened as a call; the object is followed by text.
    assert parse_tool_calls(text, TOOLS).tool_calls == []
    text = '```python\nx = 1\n```\nNow:\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```'
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.tool_calls == [READ] and parsed.content == "```python\nx = 1\n```\nNow:"


# ---------------------------------------------------------------- streaming: same result, held back no longer than needed

STREAM_CASES = [
    'To fix it, I will read the file first.\n\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```',
    '```\n{"name": "read_file", "parameters": {"path": "roman.py"}}\n```\nDone.',
    'I will list the folder.\n{"name": "list_dir", "arguments": {"path": "."}}\n',
    '```json\n{"name": "from_roman", "arguments": {"text": "XIV"}}\n```',
    'Here is the code:\n```python\ndef f():\n    return {"name": "read_file"}\n```\nRun it.',
    '```python\nx = 1\n```\nNow:\n```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```',
    'Call it like this:\n{"name": "read_file", "arguments": {"path": "a"}}\nand it returns the text.',
    'Sure.\n<tool_call>\n{"name": "shell", "arguments": {"command": "pytest -q"}}\n</tool_call>',
    '  \n{"name": "shell", "arguments": {"command": "ls"}}',
    'Use ``` fences and [links](x) and {braces}.\n[1] note\n{"a": 1}',
    '```json\n{"name": "read_file", "arguments": {"path": }}\n```',
    'The list: [\n{"name": "list_dir", "arguments": {}}]',
    '[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "b.py"}}]',
    'ok\n<|python_tag|>{"name": "shell", "parameters": {"command": "ls"}}',
    '{"name": "list_dir", "arguments": {"path": "."}}\n{"name": "from_roman", "arguments": {"text": "IV"}}\n{"na',
    '{"response": 2}\n{"name": "read_file", "arguments": {"path": "roman.py"}}',
]


def _feed_at(text: str, cuts: list[int], names=TOOLS) -> tuple[list[str], object]:
    splitter = ToolCallStreamSplitter(names)
    bounds = [0, *cuts, len(text)]
    pieces = [splitter.feed(text[a:b]) for a, b in zip(bounds, bounds[1:])]
    return pieces, splitter.finish()


def test_stream_equals_the_whole_parse_at_every_chunk_boundary():
    for text in STREAM_CASES:
        whole = parse_tool_calls(text, TOOLS)
        for cut in range(len(text) + 1):
            pieces, tail = _feed_at(text, [cut])
            assert "".join(pieces) + tail.content == whole.content, (text, cut)
            assert tail.tool_calls == whole.tool_calls and tail.invalid == whole.invalid
        pieces, tail = _feed_at(text, list(range(1, len(text))))  # one character at a time
        assert "".join(pieces) + tail.content == whole.content and tail.tool_calls == whole.tool_calls


def test_nothing_of_a_call_is_ever_forwarded():
    text = STREAM_CASES[0]
    pieces, tail = _feed_at(text, list(range(1, len(text))))
    assert "".join(pieces) == "To fix it, I will read the file first." and tail.tool_calls == [READ]
    assert tail.content == ""


def test_prose_and_other_code_blocks_are_not_delayed():
    text = 'Here is the code:\n```python\ndef f():\n    return {"name": "read_file"}\n```\nRun it.'
    splitter = ToolCallStreamSplitter(TOOLS)
    shown = ""
    for i, ch in enumerate(text):
        shown += splitter.feed(ch)
        seen = text[: i + 1]
        # Held back at most: trailing whitespace, two backticks, or a fence before its language is known.
        held = seen[len(shown):]
        assert seen.startswith(shown)
        assert held.strip() in ("", "`", "``", "```") or held.lstrip().startswith("```") and len(held.strip()) <= 4, (i, held)
    assert shown + splitter.finish().content == text


def test_a_fence_opening_is_decided_within_a_few_characters():
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("Look:\n```py") == "Look:\n```py"  # not json: released at once
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("Look:\n```json\n{") == "Look:"  # may be a call: held
    assert splitter.feed('"name": "re') == ""  # the start of "read_file"
    assert splitter.feed('ad_file", ') == ""  # a call: held to the end
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("Look:\n```json\n{") == "Look:"
    assert splitter.feed('"name": "pa') == '\n```json\n{"name": "pa'  # no declared tool starts so: released


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(list(' \n{}[]`":,ab') + ["```", "```json\n", '{"name": ', '"read_file"', '"f"',
                                                          '"arguments": {}', "<tool_call>", "}\n```\n", "json",
                                                          "[TOOL_CALLS]", "<|python_tag|>", '{"name": {}, ']),
                max_size=30).map("".join),
       st.lists(st.integers(0, 60), max_size=6))
def test_stream_always_ends_like_the_whole_parse(text, cuts):
    whole = parse_tool_calls(text, ["read_file", "f"])
    pieces, tail = _feed_at(text, sorted(c for c in cuts if c <= len(text)), ["read_file", "f"])
    assert "".join(pieces) + tail.content == whole.content
    assert tail.tool_calls == whole.tool_calls
