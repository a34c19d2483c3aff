"""The default system prompt: a jinja2 template shipped with the harness.

It holds nothing that changes between runs (no date, no path, no budget): those go to the dynamic
context at the end of the newest user turn, so the system section stays byte-identical for the
whole session and across sessions.
"""

from __future__ import annotations

from importlib import resources
from typing import Sequence

from hitrate.projection.project import SystemPrompt

TEMPLATE_FILE = "system_prompt.md.j2"


def default_template() -> str:
    return resources.files("hitrate.harness").joinpath(TEMPLATE_FILE).read_text(encoding="utf-8")


def default_system_prompt(tool_names: Sequence[str]) -> SystemPrompt:
    """The template with the (sorted) tool names: stable for a given tool set."""
    return SystemPrompt(template=default_template(), variables={"tool_names": sorted(tool_names)})
