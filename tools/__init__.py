"""hitrate.tools: the agent's tools (files, edits, search, shell) and the workspace sandbox policy.

A leaf component: it imports no other hitrate package. The harness gets plain-dict schemas from
`ToolRegistry.schemas()` and runs calls through `ToolRegistry.execute()`.
"""

from hitrate.tools.base import (
    ApprovalHook,
    Refusal,
    Tool,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolLimits,
    ToolResult,
    canonical_json,
    input_schema,
)
from hitrate.tools.confine import ConfinementPolicy, confinement_notice
from hitrate.tools.registry import ToolRegistry, default_tools
from hitrate.tools.sandbox import IGNORED_DIR_NAMES, Sandbox, SandboxError
from hitrate.tools.shell import UNCONFINED_SHELL

__all__ = [
    "ApprovalHook",
    "ConfinementPolicy",
    "IGNORED_DIR_NAMES",
    "Refusal",
    "Sandbox",
    "SandboxError",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolError",
    "ToolLimits",
    "ToolRegistry",
    "ToolResult",
    "UNCONFINED_SHELL",
    "canonical_json",
    "confinement_notice",
    "default_tools",
    "input_schema",
]
