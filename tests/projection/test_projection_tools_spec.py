"""Tool specs: canonical schemas from pydantic models, stable however they were built."""

from __future__ import annotations

import json

import pytest
from projection_builders import ReadArgs
from pydantic import ValidationError

from hitrate.projection.tools_spec import ToolSpec, sort_tools


def test_schema_from_args_model_is_canonical_and_class_name_free() -> None:
    spec = ToolSpec.from_args_model("read_file", "Read a file.", ReadArgs)
    text = spec.canonical_json()
    assert "ReadArgs" not in text
    assert json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False) == text
    assert spec.input_schema["required"] == ["path"]


def test_key_order_of_the_input_does_not_matter() -> None:
    a = ToolSpec(name="t", input_schema={"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}})
    b = ToolSpec(name="t", input_schema={"properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "type": "object"})
    assert a.canonical_bytes() == b.canonical_bytes()
    # Even a plain json.dumps without sort_keys gives canonical order: the dicts were rebuilt sorted.
    assert list(a.input_schema) == ["properties", "type"]


def test_bad_specs_are_refused_clearly() -> None:
    with pytest.raises(ValidationError, match="must match"):
        ToolSpec(name="has space")
    with pytest.raises(ValidationError, match="type 'object'"):
        ToolSpec(name="t", input_schema={"type": "string"})


def test_sort_tools_orders_by_name_and_refuses_duplicates() -> None:
    tools = [ToolSpec(name=n) for n in ("c", "a", "b")]
    assert [t.name for t in sort_tools(tools)] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="two tools are named 'a'"):
        sort_tools([ToolSpec(name="a"), ToolSpec(name="a", description="x")])
