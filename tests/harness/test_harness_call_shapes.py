"""The detector of replies that look like a call but carry none (`harness.call_shapes`), on the
shapes small models really wrote (issue: Qwen2.5-Coder 0.5B / 1.5B on the basic suite)."""

from __future__ import annotations

import pytest

from hitrate.harness.call_shapes import call_shape

TOOLS = ["edit_file", "glob", "grep", "list_dir", "read_file", "shell", "write_file"]


@pytest.mark.parametrize(
    "text, kind, name",
    [
        ('```json\n{"name": "read_file", "arguments": {"path": "roman.py"}}\n```', "text_call", "read_file"),
        ('{"name": "read_file", "arguments": {"path": "roman.py"}}', "text_call", "read_file"),
        ('I will look first.\n{"name": "shell", "parameters": {"command": "ls"}}', "text_call", "shell"),
        ('[{"name": "grep", "arguments": {"pattern": "x"}}]', "text_call", "grep"),
        ('{"type": "function", "function": {"name": "list_dir", "arguments": "{}"}}', "text_call", "list_dir"),
        ('{"tool_calls": [{"name": "glob", "arguments": {"pattern": "*.py"}}]}', "text_call", "glob"),
        ('```json\n{"name": "deep_merge", "arguments": {"base": {"a": 1}, "override": {"b": 2}}}\n```',
         "unknown_function", "deep_merge"),
        ('from_roman("XIV")', "unknown_function", "from_roman"),
        ('```python\nparse_duration("1h30m")\n```', "unknown_function", "parse_duration"),
        ('read_file(path="roman.py")', "text_call", "read_file"),
        ('<tool_call>\n{"name": "read_file", "arguments": {"path": \n</tool_call>', "text_call", "read_file"),
        ("<tool_call>\nread the file\n</tool_call>", "call_markup", None),
        ('```json\n{"name": "merge_intervals", "arguments": {"intervals": [(1, 2), (2, 3)]}}\n```',
         "unknown_function", "merge_intervals"),
    ],
)
def test_call_shaped_replies_are_found(text, kind, name):
    shape = call_shape(text, TOOLS)
    assert shape is not None
    assert (shape.kind, shape.name) == (kind, name)
    assert shape.describe()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Fixed: add now adds. I ran the tests and they pass.",
        "The config is now merged with `deep_merge(base, override)`, which recurses into nested dicts.",
        '```python\ndef deep_merge(a, b):\n    return {**a, **b}\n```',
        '```json\n{"name": "hitrate", "version": "1.0"}\n```',
        "Done.\n```python\nx = from_roman('XIV')\nprint(x)\n```",
    ],
)
def test_ordinary_answers_are_not_calls(text):
    assert call_shape(text, TOOLS) is None


def test_a_tool_call_wins_over_an_unknown_one():
    text = '{"name": "deep_merge", "arguments": {}}\n{"name": "read_file", "arguments": {"path": "x"}}'
    assert call_shape(text, TOOLS).name == "read_file"


def test_a_long_reply_full_of_braces_is_read_in_bounded_time():
    assert call_shape("{" * 20000 + "text", TOOLS) is None


@pytest.mark.parametrize("fixture", ["qwen2.5-coder-0.5b-instruct.json", "qwen2.5-coder-1.5b-instruct-q4_k_m.json"])
def test_real_replies_of_small_models(fixture):
    """Replies Qwen2.5-Coder-0.5B and -1.5B wrote to the agent's prompts (tests/fixtures/model_outputs):
    every call written as text is found, naming the tool when it named one; prose is left alone."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parents[1] / "fixtures/model_outputs" / fixture).read_text())
    tools = [t["function"]["name"] for t in data["tool_schemas"]]
    for reply in data["replies"]:
        shape = call_shape(reply["text"], tools)
        expected = reply["expected_calls"]
        if expected:
            assert shape is not None and shape.kind == "text_call" and shape.name == expected[0][0], reply["scenario"]
        elif reply["shape"].startswith(("fenced json naming", "bare json naming", "fence without language")):
            assert shape is not None and shape.kind == "unknown_function", reply["scenario"]
        elif reply["shape"].startswith(("prose", "python code block")):
            assert shape is None, reply["scenario"]
