"""Cold-cache runs: a per-run nonce at the very start of every prompt.

A provider's prompt cache (and the local engine's radix cache) can only reuse a prefix that is
byte-identical from the first token. A cold run puts a nonce derived from its run id where every
wire format starts:

- the first tool's description (the Anthropic Messages API renders tools before the system
  prompt), and
- the first line of the system prompt (OpenAI-style chat templates render the system message
  first and the tools inside or after it).

Nothing cached before the run can then match more than the few bytes ahead of the nonce, while
requests within the run still share their prefix with one another, as they would in production.
A warm run sends no nonce, or the nonce of an earlier cold run, to reuse what that run cached.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from hitrate.harness.session import SessionInputs
from hitrate.projection.project import SystemPrompt
from hitrate.projection.tools_spec import ToolSpec


def run_nonce(run_id: str) -> str:
    """The nonce of a cold run: a function of its run id, so shards of one run on several machines
    (started with the same `--run-id`) share it, and a new run never reuses an old one."""
    return hashlib.sha256(f"hitrate-cold-run:{run_id}".encode("utf-8")).hexdigest()[:16]


def nonce_line(nonce: str) -> str:
    return f"[eval run {nonce}]"


def _with_nonce_system(system: SystemPrompt | str, nonce: str) -> SystemPrompt | str:
    line = nonce_line(nonce) + "\n"
    if isinstance(system, str):
        return line + system
    # The nonce is hex, so it cannot contain template syntax.
    return SystemPrompt(template=line + system.template, variables=system.variables)


def _with_nonce_tools(specs: Sequence[ToolSpec], first: str | None, nonce: str) -> list[ToolSpec]:
    out = []
    for spec in specs:
        if spec.name == first:
            spec = spec.model_copy(update={"description": f"{nonce_line(nonce)} {spec.description}".rstrip()})
        out.append(spec)
    return out


def with_run_nonce(inputs: SessionInputs, nonce: str, first_tool: str | None) -> SessionInputs:
    """`inputs` with the nonce at the start of the system prompt and of `first_tool`'s description
    (the tool the layout renders first; None when the session has no tools)."""
    return SessionInputs(
        tools=inputs.tools,
        tool_specs=_with_nonce_tools(inputs.tool_specs, first_tool, nonce),
        system=_with_nonce_system(inputs.system, nonce),
        docs=inputs.docs,
    )
