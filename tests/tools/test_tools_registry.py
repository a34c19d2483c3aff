"""ToolRegistry: canonical, stable schemas and execution that never raises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pydantic import Field

from hitrate.tools import (
    Tool,
    ToolArgs,
    ToolContext,
    ToolRegistry,
    ToolResult,
    canonical_json,
    default_tools,
    input_schema,
)

EXPECTED_NAMES = ["edit_file", "glob", "grep", "list_dir", "read_file", "shell", "write_file"]


def _walk(node, found_keys: set[str], in_properties: bool = False) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if not in_properties:
                found_keys.add(key)
            _walk(value, found_keys, in_properties=(key == "properties" and not in_properties))
    elif isinstance(node, list):
        for item in node:
            _walk(item, found_keys)


def test_default_tools_are_ordered_by_name() -> None:
    registry = default_tools()
    assert registry.names == EXPECTED_NAMES
    assert [tool.name for tool in registry] == EXPECTED_NAMES
    assert [schema["name"] for schema in registry.schemas()] == EXPECTED_NAMES
    shuffled = ToolRegistry(reversed(list(registry)))
    assert shuffled.schema_json() == registry.schema_json()


def test_schemas_are_plain_canonical_dicts_with_descriptions() -> None:
    for schema in default_tools().schemas():
        assert list(schema) == ["description", "input_schema", "name"]
        assert json.loads(json.dumps(schema)) == schema  # plain JSON values only
        assert json.dumps(schema, sort_keys=True) == json.dumps(schema)  # keys already sorted
        params = schema["input_schema"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        for name, prop in params["properties"].items():
            assert prop.get("description"), f"{schema['name']}.{name} has no description"
        keys: set[str] = set()
        _walk(params, keys)
        assert "title" not in keys


def test_schema_bytes_do_not_depend_on_the_workspace_or_the_process(tmp_path: Path) -> None:
    first = default_tools().schema_json()
    second = default_tools(ripgrep=None).schema_json()
    assert first == second
    for folder in (tmp_path, Path.cwd(), Path.home()):
        assert str(folder) not in first
    script = "from hitrate.tools import default_tools; import sys; sys.stdout.write(default_tools().schema_json())"
    other = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert other == first
    assert default_tools().fingerprint() == default_tools(ripgrep=None).fingerprint()


def test_canonical_json() -> None:
    assert canonical_json({"b": 1, "a": ["é", {"d": 2, "c": None}]}) == '{"a":["é",{"c":null,"d":2}],"b":1}'


class _TitledArgs(ToolArgs):
    title: str = Field(description="A property that happens to be called title.")


def test_property_named_title_survives() -> None:
    schema = input_schema(_TitledArgs)
    assert schema["properties"]["title"] == {"description": "A property that happens to be called title.", "type": "string"}
    assert "title" not in {k for k in schema if k != "properties"}


class _BoomArgs(ToolArgs):
    count: int = Field(default=1, description="How many.")


class _BoomTool(Tool[_BoomArgs]):
    name = "boom"
    description = "Always fails."
    args_model = _BoomArgs

    def run(self, args: _BoomArgs, ctx: ToolContext) -> ToolResult:
        raise RuntimeError("kaput")


class _WrongReturnTool(Tool[_BoomArgs]):
    name = "wrong"
    description = "Returns the wrong type."
    args_model = _BoomArgs

    def run(self, args, ctx):  # type: ignore[override]
        return "plain string"


def test_execute_turns_every_failure_into_an_error_result(ctx: ToolContext) -> None:
    registry = ToolRegistry([*default_tools(), _BoomTool(), _WrongReturnTool()])
    cases = [
        ("nope", "{}", "unknown tool 'nope'; available tools: boom, edit_file, glob"),
        ("read_file", "{not json", "arguments for read_file are not valid JSON (Expecting property name"),
        ("read_file", "[1, 2]", "arguments for read_file must be a JSON object, got list"),
        ("read_file", "", "invalid arguments for read_file:\n- path: Field required"),
        ("read_file", None, "invalid arguments for read_file:\n- path: Field required"),
        ("read_file", {"path": 3}, "- path: Input should be a valid string"),
        ("read_file", {"path": "a", "start_line": 0}, "- start_line: Input should be greater than or equal to 1"),
        ("read_file", {"path": "a", "mode": "r"}, "- mode: unknown argument"),
        ("edit_file", {"path": "a"}, "- old_string: Field required\n- new_string: Field required"),
        ("boom", "{}", "boom failed: RuntimeError: kaput"),
        ("wrong", "{}", "wrong returned str instead of a ToolResult"),
    ]
    for name, arguments, expected in cases:
        result = registry.execute(name, arguments, ctx)
        assert result.is_error, (name, arguments)
        assert expected in result.content, (expected, result.content)


def test_execute_accepts_json_text_and_dicts(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "f.txt").write_text("hello\n")
    registry = default_tools()
    from_text = registry.execute("read_file", '{"path": "f.txt"}', ctx)
    from_dict = registry.execute("read_file", {"path": "f.txt"}, ctx)
    assert from_text == from_dict
    assert from_text.content == "     1\thello"


def test_duplicate_names_are_rejected() -> None:
    try:
        ToolRegistry([_BoomTool(), _BoomTool()])
    except ValueError as exc:
        assert "two tools are named 'boom'" in str(exc)
    else:
        raise AssertionError("duplicate tool names were accepted")
