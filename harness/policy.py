"""Which assistant turn enters the transcript after a model call.

The default `ModelPolicy` takes the model's reply. `ReplayPolicy` takes turns from a recorded
script instead, while the request is still sent to the real backend at every step: the cache
behaviour (reads, writes, misses) is measured on real requests, but the conversation follows the
script. Evals use it to compare prompt layouts on identical conversations, and the offline demo
uses it with a random-weight model whose own replies would be noise.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from hitrate.harness.wire.types import CallResult
from hitrate.projection.canonical import canonical_json
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolCallBlock


class Policy(Protocol):
    replays: bool
    """True when the transcript follows a script rather than the model."""

    def decide(self, step: int, result: CallResult) -> AssistantMessage | None:
        """The assistant turn to append after call number `step` (1-based); None ends the session."""
        ...


class ModelPolicy:
    """Take the model's own reply."""

    replays = False

    def decide(self, step: int, result: CallResult) -> AssistantMessage | None:
        return result.assistant


class RecordedToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """A JSON object, or the exact argument text a model once produced."""


class RecordedTurn(BaseModel):
    """One assistant turn of a script: text and/or tool calls."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    tool_calls: list[RecordedToolCall] = Field(default_factory=list)

    def to_message(self, step: int) -> AssistantMessage:
        blocks: list[Any] = []
        if self.text:
            blocks.append(TextBlock(text=self.text))
        for i, call in enumerate(self.tool_calls):
            arguments = call.arguments if isinstance(call.arguments, str) else canonical_json(call.arguments)
            # Ids are derived from the position in the script, so a replay is the same bytes every run.
            blocks.append(ToolCallBlock(call_id=f"toolu_replay_{step:03d}_{i}", name=call.name, arguments=arguments))
        if not blocks:
            blocks.append(TextBlock(text="(done)"))
        return AssistantMessage(content=tuple(blocks))


class ReplayPolicy:
    """Append the recorded turns in order, whatever the model answered; end when they run out."""

    replays = True

    def __init__(self, turns: list[RecordedTurn]) -> None:
        if not turns:
            raise ValueError("a replay needs at least one recorded turn")
        self.turns = list(turns)

    @classmethod
    def from_json(cls, text: str) -> "ReplayPolicy":
        data = json.loads(text)
        turns = data["turns"] if isinstance(data, dict) else data
        return cls([RecordedTurn.model_validate(t) for t in turns])

    def decide(self, step: int, result: CallResult) -> AssistantMessage | None:
        if step > len(self.turns):
            return None
        return self.turns[step - 1].to_message(step)
