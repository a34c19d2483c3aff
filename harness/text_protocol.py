"""The text tool protocol, for models without reliable function calling (`--tool-protocol text`).

As mini-swe-agent does with any model: requests carry no `tools` field; the system prompt
(`system_prompt_text.md.j2`) asks for exactly one fenced shell block per reply,

    ```bash
    pytest -q tests/test_roman.py
    ```

the harness runs it with the same sandboxed `shell` tool native calls use, and returns its output
(with the exit code) as the next user turn. History stays append-only, as with native calls.

- A reply with no ```` ```bash ```` block, or with several, gets a format-error turn saying what was
  wrong; a second such reply in a row ends the run (the model is taken to have given its answer).
- The model finishes by sending a block whose command is `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`
  (mini-swe-agent's marker): the run ends there, the command is not run. A finish in a block is
  chosen over "a reply with no block" because small models often drop the block by mistake mid-task;
  that is a format error to repair, not a final answer.
"""

from __future__ import annotations

import re
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict

from hitrate.harness.call_shapes import call_shape

ToolProtocol = Literal["native", "text"]
TOOL_PROTOCOLS: tuple[ToolProtocol, ...] = ("native", "text")

FINISH_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""The command that ends the task (not run): the model's way of saying it is done."""

SHELL_LANGUAGES = ("bash", "sh", "shell", "zsh")
"""Fence languages read as a command block; a fence in another language (python, json) is not one."""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)

FORMAT_REMINDER = (
    "Reply with a short thought, then exactly one ```bash block holding the command to run next, like this:\n"
    "```bash\nls\n```\n"
    f"When the task is done and checked, send a block with only `{FINISH_COMMAND}`."
)


class TextAction(BaseModel):
    """What one reply under the text protocol asks for."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["command", "finish", "format_error"]
    command: str = ""
    """With kind "command": the command to run."""
    problem: str = ""
    """With kind "format_error": what was wrong with the reply, in a few words."""


def shell_blocks(text: str) -> list[str]:
    """The commands of the fenced shell blocks in `text`, in order."""
    return [body.strip() for language, body in _FENCE.findall(text) if language.lower() in SHELL_LANGUAGES]


def parse_reply(text: str, tool_names: Sequence[str] = ("shell",)) -> TextAction:
    """The action a reply asks for: one block is a command (or the finish), anything else a format error."""
    blocks = shell_blocks(text)
    if len(blocks) > 1:
        return TextAction(kind="format_error", problem=f"your reply has {len(blocks)} ```bash blocks; send exactly one")
    if not blocks:
        shape = call_shape(text, tool_names)
        if shape is not None:
            return TextAction(kind="format_error", problem=f"your reply contains {shape.describe()}; "
                              "tools are not called that way here, commands run from a ```bash block")
        return TextAction(kind="format_error", problem="your reply has no ```bash block")
    command = blocks[0]
    if not command:
        return TextAction(kind="format_error", problem="your ```bash block is empty")
    if command.splitlines()[0].strip() == FINISH_COMMAND:
        return TextAction(kind="finish")
    return TextAction(kind="command", command=command)


def format_error_text(problem: str) -> str:
    """The user turn answering a reply the protocol cannot act on."""
    return f"Format error: {problem}. Nothing was run.\n{FORMAT_REMINDER}"


def observation_text(output: str) -> str:
    """The user turn carrying a command's output (it ends with the exit code, as the shell tool writes it)."""
    return f"<output>\n{output.rstrip()}\n</output>"
