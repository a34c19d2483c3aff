"""The append-only transcript: every message the session has sent or received, exactly as it was.

Everything here is immutable. `Transcript.append` returns a new transcript that shares every earlier
message object with the old one, so the projector can tell "same message as last request" by identity
and never re-serialises history.

Byte-exactness rules:
- Content the model produced (assistant text, thinking and its signature, tool-call arguments) is stored
  as received. Tool-call arguments are the raw JSON *string* the model emitted, never a parsed dict,
  because re-serialising a dict can reorder keys or change spacing and so change the prefix bytes.
- `NativeBlock` optionally carries the provider's own JSON for a block, byte for byte, so an adapter
  for the same wire API can re-send it unchanged (e.g. Anthropic `tool_use.input` as an object).
- Dynamic context (date, cwd, git status, budget...) enters a user message only as `ContextBlock`s at
  its end, and only once sent (see `Transcript.freeze_context`); later changes are new blocks.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Iterable, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator


class TranscriptError(ValueError):
    """A message or transcript that breaks the append-only conversation rules."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NativeBlock(_Frozen):
    """A provider's own JSON for one block, kept byte for byte for exact re-sending."""

    api: str
    """The wire API it came from: "anthropic", "openai_chat", "openai_responses", ..."""
    raw: str
    """The block's JSON text exactly as received."""


class TextBlock(_Frozen):
    """Plain text: typed by the user, or produced by the model (kept byte for byte)."""

    type: Literal["text"] = "text"
    text: str
    native: NativeBlock | None = None


class ContextBlock(_Frozen):
    """Dynamic context (date, cwd, git status, budget left, ...) as it was sent with one user turn.

    `values` holds only the entries that changed since the previously sent context block (the first
    block holds them all); `None` means the entry was removed. `text` is the exact rendered text that
    was sent, frozen so that later changes to the renderer cannot alter history.
    """

    type: Literal["context"] = "context"
    text: str = Field(min_length=1)
    values: tuple[tuple[str, str | None], ...]

    def apply_to(self, state: dict[str, str]) -> None:
        """Update `state` (the context as the model has seen it) with this block's changes."""
        for key, value in self.values:
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value


class ThinkingBlock(_Frozen):
    """Model reasoning with its provider signature (Anthropic `signature`, OpenAI encrypted reasoning).

    Redacted thinking keeps the opaque payload in `thinking` and sets `redacted`.
    """

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    redacted: bool = False
    native: NativeBlock | None = None


class ToolCallBlock(_Frozen):
    """One tool call as the model produced it."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str
    """The arguments exactly as the model emitted them: a raw JSON string, never re-serialised."""
    native: NativeBlock | None = None

    def parsed_arguments(self) -> Any:
        """The arguments as JSON values; raises TranscriptError (not a bare JSONDecodeError) if malformed."""
        try:
            return json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"tool call {self.call_id!r} ({self.name}) has malformed JSON arguments: {exc}"
            ) from exc


class ToolResultBlock(_Frozen):
    """The result of one tool call, answered in the user/tool turn that follows the call."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str = Field(min_length=1)
    content: str
    is_error: bool = False


UserBlock = Annotated[Union[ToolResultBlock, TextBlock, ContextBlock], Field(discriminator="type")]
AssistantBlock = Annotated[Union[TextBlock, ThinkingBlock, ToolCallBlock], Field(discriminator="type")]

# Order of block types inside a user message. Anthropic requires tool_result blocks first; frozen
# context always trails, so freezing a new context block is a pure append of bytes.
_USER_BLOCK_RANK = {"tool_result": 0, "text": 1, "context": 2}


class UserMessage(_Frozen):
    """A user turn: tool results (first), then text, then frozen dynamic-context blocks (last)."""

    role: Literal["user"] = "user"
    content: tuple[UserBlock, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _block_order(self) -> "UserMessage":
        ranks = [_USER_BLOCK_RANK[b.type] for b in self.content]
        if ranks != sorted(ranks):
            raise TranscriptError(
                "user message blocks must be ordered tool_result, then text, then context; got "
                + ", ".join(b.type for b in self.content)
            )
        return self

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    @property
    def context_blocks(self) -> list[ContextBlock]:
        return [b for b in self.content if isinstance(b, ContextBlock)]


class AssistantMessage(_Frozen):
    """A model turn: text, thinking and tool calls in the order the model produced them.

    Several tool calls in one turn are parallel calls; all their results come in the next user turn.
    """

    role: Literal["assistant"] = "assistant"
    content: tuple[AssistantBlock, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_call_ids(self) -> "AssistantMessage":
        ids = [b.call_id for b in self.content if isinstance(b, ToolCallBlock)]
        if len(ids) != len(set(ids)):
            raise TranscriptError(f"duplicate tool call ids in one assistant turn: {ids}")
        return self

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.content if isinstance(b, ToolCallBlock)]


Message = Annotated[Union[UserMessage, AssistantMessage], Field(discriminator="role")]


def _check_follows(previous: UserMessage | AssistantMessage | None, message: UserMessage | AssistantMessage) -> None:
    """Raise TranscriptError unless `message` may directly follow `previous`."""
    if previous is None:
        if message.role != "user":
            raise TranscriptError("a transcript must start with a user message")
        if message.tool_results:
            raise TranscriptError("the first user message cannot carry tool results")
        return
    if previous.role == message.role:
        raise TranscriptError(f"two {message.role} messages in a row; roles must alternate")
    if isinstance(message, UserMessage):
        assert isinstance(previous, AssistantMessage)
        expected = [c.call_id for c in previous.tool_calls]
        got = [r.call_id for r in message.tool_results]
        if len(got) != len(set(got)):
            raise TranscriptError(f"duplicate tool results for one call: {got}")
        missing = [c for c in expected if c not in got]
        unknown = [c for c in got if c not in expected]
        if missing or unknown:
            raise TranscriptError(
                f"tool results must answer exactly the previous turn's calls; missing {missing}, unknown {unknown}"
            )


class Transcript(_Frozen):
    """An immutable, append-only list of messages. Every change returns a new transcript."""

    messages: tuple[Message, ...] = ()

    @model_validator(mode="after")
    def _conversation_rules(self) -> "Transcript":
        previous = None
        for message in self.messages:
            _check_follows(previous, message)
            previous = message
        return self

    def append(self, message: UserMessage | AssistantMessage) -> "Transcript":
        """A new transcript with `message` at the end (checked against the current last message only)."""
        if not isinstance(message, (UserMessage, AssistantMessage)):
            raise TranscriptError(f"not a message: {type(message).__name__}")
        _check_follows(self.messages[-1] if self.messages else None, message)
        return Transcript.model_construct(messages=self.messages + (message,))

    def extend(self, messages: Iterable[UserMessage | AssistantMessage]) -> "Transcript":
        result = self
        for message in messages:
            result = result.append(message)
        return result

    def freeze_context(self, block: ContextBlock | None) -> "Transcript":
        """Record that `block` (a Prompt's `tail`) was sent at the end of the newest user message.

        Only bytes are appended, so every section hash of the request just sent stays valid. A `None`
        block (nothing changed since the last sent context) returns the transcript unchanged.
        """
        if block is None:
            return self
        if not isinstance(block, ContextBlock):
            raise TranscriptError(f"only a ContextBlock can be frozen, not {type(block).__name__}")
        if not self.messages or not isinstance(self.messages[-1], UserMessage):
            raise TranscriptError("dynamic context can only be frozen onto a newest user message")
        last = self.messages[-1]
        frozen = UserMessage.model_construct(role="user", content=last.content + (block,))
        return Transcript.model_construct(messages=self.messages[:-1] + (frozen,))

    def sent_context(self) -> dict[str, str]:
        """The dynamic context as the model last saw it: all frozen context blocks applied in order."""
        state: dict[str, str] = {}
        for message in self.messages:
            if isinstance(message, UserMessage):
                for block in message.context_blocks:
                    block.apply_to(state)
        return state
