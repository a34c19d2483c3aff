"""What every tool is made of: argument models, the run context, results, and canonical schemas.

The JSON schema a model sees for a tool is generated from the tool's pydantic argument model and
canonicalised (no pydantic titles, keys sorted), so the tools section of every request is the same
bytes on every run and on every machine. Nothing per-run (workspace path, time, limits) may appear
in a name, description or schema: a schema that embeds the cwd busts the prompt cache whenever the
workspace moves.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, ClassVar, Generic, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from hitrate.tools.confine import ConfinementPolicy
from hitrate.tools.container_shell import ContainerShell
from hitrate.tools.sandbox import Sandbox

@dataclass(frozen=True)
class Refusal:
    """What an approval hook returns to refuse an action and tell the model why (the user's words
    go back in the tool result). Falsy, like the plain False a hook may also return."""

    reason: str = ""

    def __bool__(self) -> bool:
        return False


# Called before a tool changes anything (shell commands, file writes and edits) with the tool's
# name and its validated arguments; returning False (or a Refusal) refuses the action.
ApprovalHook = Callable[[str, dict[str, Any]], "bool | Refusal"]


class ToolError(Exception):
    """A failure a tool reports to the model as an error result (not a crash of the harness)."""


class ToolRefused(ToolError):
    """The approval hook refused the action with a reason; the registry reports it as refused."""

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(f"{tool} was not approved by the user: {reason}")
        self.tool = tool
        self.reason = reason


class ToolResult(BaseModel):
    """What a tool hands back: text for the model, an error flag, and data for the harness/TUI."""

    model_config = ConfigDict(frozen=True)

    content: str = Field(description="Text sent back to the model as the tool result.")
    is_error: bool = Field(default=False, description="True when the call failed or was refused.")
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Structured details for the harness and TUI (diffs, exit codes); never sent to the model.",
    )


class ToolLimits(BaseModel):
    """Size and time caps that keep one tool result from flooding the context window."""

    model_config = ConfigDict(frozen=True)

    read_max_lines: int = Field(default=2000, ge=1, description="Most lines one read_file call returns.")
    read_max_file_bytes: int = Field(
        default=20 * 1024 * 1024, ge=1, description="Files larger than this are refused by read_file."
    )
    max_line_chars: int = Field(
        default=2000, ge=20, description="Longer lines are cut in read_file and grep output."
    )
    output_max_chars: int = Field(
        default=30_000, ge=200, description="Most characters of shell output or file text returned."
    )
    list_max_entries: int = Field(default=1000, ge=1, description="Most entries list_dir and glob return.")
    grep_max_matches: int = Field(default=200, ge=1, description="Most matching lines grep returns.")
    grep_max_file_bytes: int = Field(
        default=5 * 1024 * 1024, ge=1, description="grep skips files larger than this."
    )
    shell_max_timeout_s: float = Field(
        default=1800.0, gt=0, description="Upper bound on any shell command's timeout."
    )
    shell_kill_grace_s: float = Field(
        default=2.0, ge=0, description="Time between SIGTERM and SIGKILL for a timed-out command."
    )


@dataclass(frozen=True)
class ToolContext:
    """Per-run state a tool needs: the workspace, the optional approval hook, limits, environment,
    and the event that says the user stopped the run."""

    workspace: Path
    approve: ApprovalHook | None = None
    limits: ToolLimits = field(default_factory=ToolLimits)
    # Base environment for shell commands before scrubbing; None means the process environment.
    env: Mapping[str, str] | None = None
    # Set by another thread when the user cancels: a long-running tool (the shell) polls it and
    # stops early instead of running to its timeout.
    cancel: threading.Event | None = None
    # How shell commands are confined (network, resource limits, extra variables, hidden paths).
    confinement: ConfinementPolicy = field(default_factory=ConfinementPolicy)
    # Where no OS sandbox exists, shell commands need the user's approval one by one; True lets
    # them run unconfined without asking (an explicit opt-in for trusted, headless use).
    allow_unconfined_shell: bool = False
    # A task set in its own container image (Terminal-Bench / Harbor): shell commands run in that
    # container, whose working directory is the workspace (bind-mounted), not on the host.
    container: ContainerShell | None = None

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    @cached_property
    def sandbox(self) -> Sandbox:
        return Sandbox(self.workspace, alias=self.container.workdir if self.container is not None else None)

    def approved(self, tool: str, args: BaseModel) -> bool:
        """Ask the hook; a Refusal with a reason raises ToolRefused, so the reason reaches the
        model without every tool having to carry it."""
        if self.approve is None:
            return True
        verdict = self.approve(tool, args.model_dump(mode="json"))
        if isinstance(verdict, Refusal) and verdict.reason.strip():
            raise ToolRefused(tool, verdict.reason.strip())
        return bool(verdict)


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown arguments are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


ArgsT = TypeVar("ArgsT", bound=ToolArgs)


def canonical_json(value: Any) -> str:
    """The one JSON spelling hitrate generates: sorted keys, fixed separators, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# Keywords whose value maps property names to sub-schemas: their keys are names, not keywords,
# so a property that happens to be called "title" is kept.
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def _strip_titles(node: Any, *, keys_are_names: bool = False) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key in sorted(node):
            if key == "title" and not keys_are_names:
                # pydantic derives a title from every class and field name; it only repeats the
                # name and costs tokens on every request.
                continue
            out[key] = _strip_titles(node[key], keys_are_names=(key in _NAME_MAPS and not keys_are_names))
        return out
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    return node


def input_schema(args_model: type[BaseModel]) -> dict[str, Any]:
    """The canonical JSON schema of a tool's arguments (titles removed, keys sorted recursively)."""
    schema = _strip_titles(args_model.model_json_schema(mode="validation"))
    schema.setdefault("properties", {})
    return schema


class Tool(ABC, Generic[ArgsT]):
    """One tool: a fixed name, a description, an argument model, and `run`.

    `run` receives validated arguments. It reports expected failures by returning an error
    ToolResult or raising ToolError / SandboxError; the registry turns anything it raises into an
    error result, so a tool bug never crashes the agent loop.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[ToolArgs]]

    @abstractmethod
    def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult: ...

    def schema(self) -> dict[str, Any]:
        """`{"name", "description", "input_schema"}` as plain dicts, the same bytes on every run."""
        return {
            "description": self.description,
            "input_schema": input_schema(self.args_model),
            "name": self.name,
        }


def refused(tool: str, reason: str = "") -> ToolResult:
    because = f": {reason}" if reason else ""
    return ToolResult(
        content=f"{tool} was not approved by the user{because}; nothing was changed",
        is_error=True,
        metadata={"refused": True, **({"reason": reason} if reason else {})},
    )
