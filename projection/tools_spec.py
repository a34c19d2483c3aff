"""Tool definitions as the model sees them, in one canonical, run-independent form."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hitrate.projection.canonical import canonical_bytes, canonical_json, sort_keys_deep

# What every provider accepts as a tool name (Anthropic and OpenAI share this rule).
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class ToolSpec(BaseModel):
    """One tool: its name, description and JSON schema for its arguments.

    `input_schema` is stored with every dict rebuilt in sorted-key order, so however it was built,
    it serialises the same way. It must not contain anything that varies per run (cwd, dates, ids):
    lint flags such values.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _TOOL_NAME.match(name):
            raise ValueError(f"tool name {name!r} must match {_TOOL_NAME.pattern}")
        return name

    @field_validator("input_schema")
    @classmethod
    def _canonical_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type") != "object":
            raise ValueError("a tool's input_schema must be a JSON schema with type 'object'")
        return sort_keys_deep(schema)

    def canonical_json(self) -> str:
        return canonical_json(self.model_dump(mode="json"))

    def canonical_bytes(self) -> bytes:
        return canonical_bytes(self.model_dump(mode="json"))

    @classmethod
    def from_args_model(cls, name: str, description: str, args_model: type[BaseModel]) -> "ToolSpec":
        """Build a spec from a pydantic model of the tool's arguments.

        The schema comes from the class alone (pydantic's JSON schema of it), so it is identical in
        every run. Pydantic's top-level "title" (the Python class name) is dropped: renaming a class
        should not change the prompt.
        """
        schema = args_model.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return cls(name=name, description=description, input_schema=schema)


def sort_tools(tools: list[ToolSpec] | tuple[ToolSpec, ...]) -> list[ToolSpec]:
    """Tools ordered by name; two tools with one name is an error (the model could not tell them apart)."""
    ordered = sorted(tools, key=lambda t: t.name)
    for a, b in zip(ordered, ordered[1:]):
        if a.name == b.name:
            raise ValueError(f"two tools are named {a.name!r}")
    return ordered
