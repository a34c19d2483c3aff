"""What a session is configured with and what the head of its every request is built from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.compaction_settings import CompactionMode
from hitrate.harness.prompts import default_system_prompt, text_protocol_system_prompt
from hitrate.harness.retry import RetryPolicy
from hitrate.harness.text_protocol import ToolProtocol
from hitrate.harness.wire.effort import Effort
from hitrate.harness.wire.timeouts import CallTimeouts
from hitrate.projection.docs import ProjectDoc, discover_docs
from hitrate.projection.project import SystemPrompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.tools.registry import ToolRegistry, default_tools


class SessionConfig(BaseModel):
    """Settings of one session."""

    model_config = ConfigDict(frozen=True)

    max_output_tokens: int | None = Field(default=None, ge=1)
    """`max_tokens` of every call; None: the model's default, which leaves room for thinking on
    models that think by default (`Session.max_output_tokens`)."""
    effort: Effort | None = None
    """The reasoning effort every call asks for (`--effort`); None: the model's own default."""
    retry: RetryPolicy = RetryPolicy()
    timeouts: CallTimeouts = CallTimeouts()
    """How long each call may wait to connect, for the response headers, and between stream chunks."""
    run_id: str | None = None
    task_id: str | None = None
    label: str | None = None
    """Shown in `hitrate ledger` next to the session id."""
    layout: str | None = None
    """Ledger tag for evals ("cache_aware", "naive")."""
    cache_mode: str | None = None
    """Ledger tag for evals ("cold", "warm")."""
    context_window: int | None = Field(default=None, ge=1)
    """The model's input window in tokens; None: what the server reports, else the price table's
    `max_input_tokens` (see `harness.context_window`; no threshold compaction where none knows)."""
    compact_at: float = Field(default=0.8, gt=0, le=1)
    """Compact the transcript before a call whose prompt passes this share of the window."""
    compaction: CompactionMode = "client"
    """client, native (the provider's own, where the route has it, else client) or off."""
    idle_compaction: bool = False
    """Compact an idle session before its cached prefix expires when that is expected to save money
    (`harness.idle_compaction`); off by default: it calls the model while the user is away."""
    clear_tool_results: bool = True
    """Before compacting, stub old large tool results when that saves more than the cache rewrite
    it causes (`projection.clearing`)."""
    tool_protocol: ToolProtocol | None = None
    """native: tools sent as the API's function calling; text: one fenced shell block per reply
    (`harness.text_protocol`). None: the model's `tool_protocol` in the config file, else native."""


@dataclass
class SessionInputs:
    """What the head of every request is built from, fixed for the session."""

    tools: ToolRegistry
    tool_specs: list[ToolSpec]
    system: SystemPrompt | str
    docs: list[ProjectDoc] | str
    """The docs found in the workspace, or the rendered docs section a resumed session recorded."""


def session_inputs(
    workspace: Path, tools: ToolRegistry | None = None, system: SystemPrompt | str | None = None,
    *, protocol: ToolProtocol = "native",
) -> SessionInputs:
    """Tools (default set), their specs, the system prompt and the workspace's project docs (read once).
    Under the text protocol no tool spec is sent (the shell still runs the model's commands) and the
    system prompt describes the reply format instead."""
    registry = tools if tools is not None else default_tools()
    if protocol == "text":
        return SessionInputs(
            tools=registry, tool_specs=[], system=system if system is not None else text_protocol_system_prompt(),
            docs=discover_docs(workspace),
        )
    specs = [ToolSpec(name=s["name"], description=s["description"], input_schema=s["input_schema"]) for s in registry.schemas()]
    return SessionInputs(
        tools=registry,
        tool_specs=specs,
        system=system if system is not None else default_system_prompt(registry.names),
        docs=discover_docs(workspace),
    )
