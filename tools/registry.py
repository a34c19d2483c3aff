"""ToolRegistry: the ordered tool set, its canonical schemas, and failure-proof execution."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Iterator, Mapping

from pydantic import ValidationError

from hitrate.tools.base import Tool, ToolContext, ToolError, ToolRefused, ToolResult, canonical_json, refused
from hitrate.tools.edit import EditFileTool
from hitrate.tools.files import ReadFileTool, WriteFileTool
from hitrate.tools.grep import GrepTool
from hitrate.tools.listing import GlobTool, ListDirTool
from hitrate.tools.sandbox import SandboxError
from hitrate.tools.shell import ShellTool


def _error(message: str, **metadata: Any) -> ToolResult:
    return ToolResult(content=message, is_error=True, metadata=metadata)


def _capped(result: ToolResult, max_chars: int) -> ToolResult:
    # Only error texts: successful results are already paged by their tools within the same caps.
    text = result.content
    if not result.is_error or len(text) <= max_chars:
        return result
    note = f"\n[... {len(text) - max_chars:,} characters cut from the middle of {len(text):,} ...]\n"
    keep = max(max_chars - len(note), 0)
    head, tail = keep // 2, keep - keep // 2
    cut = text[:head] + note + (text[-tail:] if tail else "")
    return result.model_copy(update={"content": cut, "metadata": {**result.metadata, "content_cut": True}})


def format_validation_error(tool: str, exc: ValidationError) -> str:
    """One line per problem, naming the argument: what a model needs to correct its call."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown argument"
        problems.append(f"- {where}: {message}")
    return f"invalid arguments for {tool}:\n" + "\n".join(problems)


class ToolRegistry:
    """An immutable set of tools, always ordered by name (the order sent to the model)."""

    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        by_name: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in by_name:
                raise ValueError(f"two tools are named {tool.name!r}")
            by_name[tool.name] = tool
        self._tools = {name: by_name[name] for name in sorted(by_name)}

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's `{"name", "description", "input_schema"}`, ordered by name."""
        return [tool.schema() for tool in self._tools.values()]

    def schema_json(self) -> str:
        """The canonical JSON text of `schemas()`: identical bytes for identical tool sets."""
        return canonical_json(self.schemas())

    def fingerprint(self) -> str:
        """sha256 of `schema_json()`: changes exactly when the tool section of a prompt would."""
        return hashlib.sha256(self.schema_json().encode("utf-8")).hexdigest()

    def execute(self, name: str, arguments: str | Mapping[str, Any] | None, ctx: ToolContext) -> ToolResult:
        """Run one tool call. Never raises for bad input or a failing tool: the problem comes back
        as an error ToolResult the model can read and act on. No error text is longer than
        the output cap: an exception's text (say, one that quotes a 5 MB input) is cut like shell output."""
        return _capped(self._execute(name, arguments, ctx), ctx.limits.output_max_chars)

    def _execute(self, name: str, arguments: str | Mapping[str, Any] | None, ctx: ToolContext) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return _error(f"unknown tool {name!r}; available tools: {', '.join(self._tools)}", tool=name)
        if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            # Some providers send "" or nothing for a call without arguments.
            raw: Any = {}
        elif isinstance(arguments, str):
            try:
                raw = json.loads(arguments)
            except json.JSONDecodeError as exc:
                return _error(
                    f"arguments for {name} are not valid JSON ({exc.msg} at line {exc.lineno} "
                    f"column {exc.colno}); send a JSON object",
                    tool=name,
                )
        else:
            raw = arguments
        if not isinstance(raw, Mapping):
            return _error(f"arguments for {name} must be a JSON object, got {type(raw).__name__}", tool=name)
        try:
            args = tool.args_model.model_validate(dict(raw))
        except ValidationError as exc:
            return _error(format_validation_error(name, exc), tool=name)
        try:
            result = tool.run(args, ctx)
        except ToolRefused as exc:
            return refused(name, exc.reason)
        except (SandboxError, ToolError) as exc:
            return _error(str(exc), tool=name)
        except Exception as exc:  # a tool bug must not end the agent's session
            return _error(f"{name} failed: {type(exc).__name__}: {exc}", tool=name, exception=type(exc).__name__)
        if not isinstance(result, ToolResult):
            return _error(f"{name} returned {type(result).__name__} instead of a ToolResult", tool=name)
        return result


def default_tools(*, ripgrep: str | None = "auto") -> ToolRegistry:
    """The standard tool set: edit_file, glob, grep, list_dir, read_file, shell, write_file.

    `ripgrep`: path of rg, None to force the pure-Python grep, "auto" to use rg when installed.
    """
    return ToolRegistry(
        [
            EditFileTool(),
            GlobTool(),
            GrepTool(ripgrep=ripgrep),
            ListDirTool(),
            ReadFileTool(),
            ShellTool(),
            WriteFileTool(),
        ]
    )
