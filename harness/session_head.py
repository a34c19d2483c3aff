"""The head a session's requests were built from (tool specs, system prompt, project docs), recorded
in the ledger so that a resumed session sends the very same bytes.

Resume used to read AGENTS.md and the system template again. When they had changed, the resumed
session started a new epoch: its cached prefix was lost, and on Claude models that bind preserved
thinking blocks to their conversation every request was refused (400 "block is bound to a
different conversation"), on every retry. Now the head is frozen: the session goes on with the
recorded bytes, says what changed on disk since, and the user can ask for the current files
instead (`--refresh-docs`, `/refresh`), which is an explicit new epoch like a model switch.

The head is stored as a `head` transcript entry when the session's first request is built, and
again whenever a later request's head differs (a refresh, a new tool set).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from pydantic import BaseModel, ConfigDict

from hitrate.harness.session_inputs import SessionInputs, session_inputs
from hitrate.projection.docs import render_docs
from hitrate.projection.project import SystemPrompt
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec, sort_tools
from hitrate.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from hitrate.harness.session import Session

REFRESH_HINT = "hitrate run --resume <id> --refresh-docs, or /refresh in the TUI"


class StoredHead(BaseModel):
    """The exact head of a session's requests."""

    model_config = ConfigDict(frozen=True)

    tools: tuple[ToolSpec, ...]
    """The tool specs, in the order the projection sends them (sorted by name)."""
    system: str
    """The rendered system prompt."""
    docs: str
    """The rendered project-docs section."""


def head_of(prompt: Prompt) -> StoredHead:
    return StoredHead(tools=tuple(prompt.tools), system=prompt.system, docs=prompt.docs)


def head_of_inputs(inputs: SessionInputs) -> StoredHead:
    """The head `inputs` would give a request (what the workspace and template say now)."""
    system = inputs.system.render() if isinstance(inputs.system, SystemPrompt) else inputs.system
    return StoredHead(tools=tuple(sort_tools(inputs.tool_specs)), system=system, docs=render_docs(inputs.docs))


def frozen_inputs(head: StoredHead, tools: ToolRegistry) -> SessionInputs:
    """Inputs that rebuild `head` byte for byte; the tools that run are `tools` (today's code)."""
    return SessionInputs(tools=tools, tool_specs=list(head.tools), system=head.system, docs=head.docs)  # type: ignore[arg-type]


def head_changes(recorded: StoredHead, current: StoredHead, doc_paths: Sequence[str] = ()) -> list[str]:
    """What differs between the recorded head and the one the workspace would give now."""
    changes: list[str] = []
    if recorded.tools != current.tools:
        changes.append("the tool definitions")
    if recorded.system != current.system:
        changes.append("the system prompt")
    if recorded.docs != current.docs:
        named = f" ({', '.join(doc_paths)})" if doc_paths else ""
        changes.append(f"the project docs{named}")
    return changes


def frozen_notice(changes: Sequence[str]) -> str:
    """What to tell the user when a resumed session keeps a head that differs from the files."""
    return (
        f"{' and '.join(changes)} changed since this session was recorded; it goes on with the recorded "
        "ones, so its cached prefix (and any thinking bound to it) stays valid. To use the current files "
        f"instead, a new cache epoch: {REFRESH_HINT}."
    )


class SessionHeadRecording:
    """Mixed into Session: stores each request's head when it changes, and refreshes it on demand."""

    def refresh_head(self: "Session") -> list[str]:
        """Build the next requests from the current tool set, system template and project docs
        (read again from the workspace) instead of the recorded ones. Returns what changed; a
        change starts a new epoch with the next call."""
        current = session_inputs(self.workspace, tools=self.inputs.tools)
        recorded = self._logged_head
        changes = head_changes(recorded, head_of_inputs(current), [d.path for d in current.docs]) if recorded else []  # type: ignore[union-attr]
        self.inputs = current
        self.head_notice = None
        if changes:
            self._epoch_reason = f"refreshed by the user: {' and '.join(changes)}"
        return changes

    def _record_head(self: "Session", prompt: Prompt) -> None:
        """Store the request's head when it is not the one stored last."""
        head = head_of(prompt)
        if head != self._logged_head:
            self._log.head(head.model_dump_json())
            self._logged_head = head
