"""The default system prompt: a jinja2 template shipped with the harness.

It holds nothing that changes between runs (no date, no path, no budget): those go to the dynamic
context at the end of the newest user turn, so the system section stays byte-identical for the
whole session and across sessions. Its variables are facts fixed for a machine and a tool set:
the sorted tool names, and what the shell's sandbox does here (`tools.confine.detect`), so that
what the prompt says about confinement is true: sandboxed, or every command needs approval.
"""

from __future__ import annotations

from importlib import resources
from typing import Sequence

from hitrate.projection.project import SystemPrompt
from hitrate.tools.confine import ConfinementPolicy, detect

TEMPLATE_FILE = "system_prompt.md.j2"
TEXT_PROTOCOL_TEMPLATE_FILE = "system_prompt_text.md.j2"
"""The system prompt of the text tool protocol (`harness.text_protocol`): one shell block per reply."""


def default_template(name: str = TEMPLATE_FILE) -> str:
    return resources.files("hitrate.harness").joinpath(name).read_text(encoding="utf-8")


def default_system_prompt(
    tool_names: Sequence[str], *, shell_confined: bool | None = None, policy: ConfinementPolicy | None = None
) -> SystemPrompt:
    """The template with the (sorted) tool names and the shell's confinement: stable for a given
    tool set on a given machine. `shell_confined` None: whether the OS sandbox works here;
    `policy`: the confinement the shell runs under (its network setting is stated)."""
    confined = detect().confined if shell_confined is None else shell_confined
    network = (policy or ConfinementPolicy()).network
    return SystemPrompt(
        template=default_template(),
        variables={"tool_names": sorted(tool_names), "shell_confined": confined, "shell_network": network},
    )


def text_protocol_system_prompt(*, shell_confined: bool | None = None, policy: ConfinementPolicy | None = None) -> SystemPrompt:
    """The system prompt of the text tool protocol: no tool list (requests carry no tools), the
    reply format, the finish command and the shell's confinement, stable for a machine."""
    from hitrate.harness.text_protocol import FINISH_COMMAND

    confined = detect().confined if shell_confined is None else shell_confined
    network = (policy or ConfinementPolicy()).network
    return SystemPrompt(
        template=default_template(TEXT_PROTOCOL_TEMPLATE_FILE),
        variables={"finish_command": FINISH_COMMAND, "shell_confined": confined, "shell_network": network},
    )
