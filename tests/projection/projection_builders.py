"""Builders shared by the projection tests: tools, messages and a small session driver."""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel, Field

from hitrate.projection.caching import CacheRules
from hitrate.projection.project import Projector, SystemPrompt
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import (
    AssistantMessage,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Transcript,
    UserMessage,
)


class ReadArgs(BaseModel):
    path: str = Field(description="File to read, relative to the workspace.")
    limit: int = Field(default=200, description="Most lines to return.")


class BashArgs(BaseModel):
    command: str = Field(description="Shell command.")
    timeout_s: float = 60.0


class EditArgs(BaseModel):
    path: str
    old: str
    new: str


TOOLS: list[ToolSpec] = [
    ToolSpec.from_args_model("read_file", "Read a text file.", ReadArgs),
    ToolSpec.from_args_model("bash", "Run a shell command in the workspace.", BashArgs),
    ToolSpec.from_args_model("edit_file", "Replace one exact string in a file.", EditArgs),
]

SYSTEM = SystemPrompt(
    template="You are {{ name }}, a coding agent.\nWork in small steps.\n{% for r in rules %}- {{ r }}\n{% endfor %}",
    variables={"name": "hitrate", "rules": ["Run the tests.", "Keep diffs small."]},
)

ANTHROPIC = CacheRules(family="anthropic", min_cacheable_tokens=200)


def user(text: str) -> UserMessage:
    return UserMessage(content=(TextBlock(text=text),))


def calls(prefix: str, n: int, *, args: str = '{"path": "a.py"}') -> AssistantMessage:
    return AssistantMessage(
        content=tuple(ToolCallBlock(call_id=f"{prefix}-{i}", name="read_file", arguments=args) for i in range(n))
    )


def results(message: AssistantMessage, output: str = "ok", extra_text: str | None = None) -> UserMessage:
    blocks: list = [ToolResultBlock(call_id=c.call_id, content=output) for c in message.tool_calls]
    if extra_text:
        blocks.append(TextBlock(text=extra_text))
    return UserMessage(content=tuple(blocks))


class Session:
    """Drives a Projector the way the harness does: append, project, freeze the tail."""

    def __init__(
        self,
        rules: CacheRules = ANTHROPIC,
        *,
        tools: Sequence[ToolSpec] = TOOLS,
        system: SystemPrompt | str = SYSTEM,
        docs: str = "",
        model: str = "model-a",
        session_id: str = "session-1",
    ) -> None:
        self.rules = rules
        self.projector = Projector(rules, session_id=session_id)
        self.transcript = Transcript()
        self.tools = list(tools)
        self.system = system
        self.docs = docs
        self.model = model
        self.context: dict[str, str] | None = {"date": "2026-11-29", "cwd": "/work/repo"}
        self.prompts: list[Prompt] = []

    def append(self, *messages) -> None:
        self.transcript = self.transcript.extend(messages)

    def send(self, **overrides) -> Prompt:
        prompt = self.projector.project(
            model=overrides.get("model", self.model),
            tools=overrides.get("tools", self.tools),
            system=overrides.get("system", self.system),
            docs=overrides.get("docs", self.docs),
            transcript=self.transcript,
            context=overrides.get("context", self.context),
            rules=overrides.get("rules", self.rules),
        )
        self.transcript = self.transcript.freeze_context(prompt.tail)
        self.prompts.append(prompt)
        return prompt

    def tool_round(self, prefix: str, n_calls: int, output: str = "ok") -> Prompt:
        """The model answers with n parallel calls; their results come back; the next request goes out."""
        reply = calls(prefix, n_calls)
        self.append(reply, results(reply, output))
        return self.send()
