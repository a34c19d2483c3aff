"""A session's transcript in the ledger: each entry stored when it is added, read back to resume.

Entries are only ever appended (the ledger's `messages` table), in transcript order:

    user, assistant   a transcript message, as its pydantic JSON
    context           the dynamic-context block frozen onto the user message before it, once that
                      message was sent (the projection appends it to the message; stored apart so
                      no stored row ever changes)
    model             the session moved to another model: {"spec": "...", "reason": "..."}
    compaction        the transcript was compacted: {"keep_from": i, "summary": "..."}
    clearing          old tool results were stubbed: {"stubs": [[message, block, text], ...]}
    effort            the reasoning effort asked for from here on: {"effort": "high" | null, "reason": "..."}
    rewind            the turns from `keep` on were taken out of the history: {"keep": n, "reason": "..."}
                      (a refused turn: the provider keeps refusing a conversation that goes on from it)
    continued         more content of the assistant turn before it (a paused turn the model went on
                      with), as an assistant message's pydantic JSON
    head              the tool specs, system prompt and docs its requests are built from, when the
                      first request is built and whenever that head changes (`session_head`)

A user message is stored before the request that carries it is sent, so a crash loses nothing that
reached the model. Content is stored as JSON strings, which give back the same characters, so a
resumed transcript projects to the same bytes and section hashes as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from hitrate.projection.compaction import CompactionPlan, compacted
from hitrate.projection.transcript import (
    AssistantMessage,
    ContextBlock,
    Message,
    Transcript,
    ToolResultBlock,
    TranscriptError,
    UserMessage,
)
from hitrate.store.ledger import Ledger, LedgerWriteError
from hitrate.store.records import MessageRecord

KIND_USER = "user"
KIND_ASSISTANT = "assistant"
KIND_CONTEXT = "context"
KIND_MODEL = "model"
KIND_EFFORT = "effort"
KIND_REWIND = "rewind"
KIND_CONTINUED = "continued"
KIND_HEAD = "head"
KIND_COMPACTION = "compaction"
"""The transcript was compacted: `{"keep_from": i, "summary": text}` (see projection.compaction)."""
KIND_CLEARING = "clearing"
"""Tool results were replaced by stubs: `{"stubs": [[message, block, text], ...]}` (projection.clearing)."""

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


class StoredTranscriptError(ValueError):
    """A stored transcript that cannot be read back (the message says which entry and why)."""


class TranscriptLog:
    """Appends one session's transcript entries to the ledger, numbering them in order."""

    def __init__(self, ledger: Ledger, session_id: str, next_seq: int = 0) -> None:
        self.ledger = ledger
        self.session_id = session_id
        self.next_seq = next_seq

    def message(self, message: UserMessage | AssistantMessage) -> None:
        self._append(message.role, message.model_dump_json())

    def context(self, block: ContextBlock) -> None:
        self._append(KIND_CONTEXT, block.model_dump_json())

    def model(self, spec: str, reason: str) -> None:
        self._append(KIND_MODEL, json.dumps({"reason": reason, "spec": spec}, sort_keys=True, ensure_ascii=False))

    def effort(self, effort: str | None, reason: str) -> None:
        self._append(KIND_EFFORT, json.dumps({"effort": effort, "reason": reason}, sort_keys=True, ensure_ascii=False))

    def rewind(self, keep: int, reason: str) -> None:
        self._append(KIND_REWIND, json.dumps({"keep": keep, "reason": reason}, sort_keys=True, ensure_ascii=False))

    def continued(self, message: AssistantMessage) -> None:
        self._append(KIND_CONTINUED, message.model_dump_json())
    def head(self, head_json: str) -> None:
        self._append(KIND_HEAD, head_json)

    def compaction(self, keep_from: int, summary: str) -> None:
        self._append(KIND_COMPACTION, json.dumps({"keep_from": keep_from, "summary": summary}, sort_keys=True, ensure_ascii=False))

    def clearing(self, positions: list[tuple[int, int]], transcript: Transcript) -> None:
        """Store the stubs `transcript` now has at `positions` (message, block), text and all."""
        stubs = [[m, b, transcript.messages[m].content[b].content] for m, b in positions]  # type: ignore[union-attr]
        self._append(KIND_CLEARING, json.dumps({"stubs": stubs}, sort_keys=True, ensure_ascii=False))

    def _append(self, kind: str, body: str) -> None:
        try:
            self.ledger.append_message(MessageRecord(session_id=self.session_id, seq=self.next_seq, kind=kind, body=body))
        except LedgerWriteError as exc:
            if exc.spooled_to is not None:
                self.next_seq += 1  # the entry is kept in the spool, at this position
            raise
        self.next_seq += 1


def _with_stubs(messages: list[UserMessage | AssistantMessage], stubs: list) -> list[UserMessage | AssistantMessage]:
    """The messages with each stubbed result's content replaced, as the live session did."""
    out = list(messages)
    for m, b, text in stubs:
        message = out[int(m)]
        block = message.content[int(b)]
        if not isinstance(message, UserMessage) or not isinstance(block, ToolResultBlock):
            raise ValueError(f"block {b} of message {m} is not a tool result")
        content = list(message.content)
        content[int(b)] = block.model_copy(update={"content": str(text)})
        out[int(m)] = UserMessage(content=tuple(content))
    return out


@dataclass(frozen=True)
class StoredTranscript:
    transcript: Transcript
    model_specs: tuple[str, ...]
    """The specs of the `model` entries, in order (the models the session moved to)."""
    model_reasons: tuple[str, ...]
    """Why the session moved to each of them, in the same order."""
    next_seq: int
    """Where the next entry goes."""
    effort: str | None = None
    """The reasoning effort the session last asked for (None: the model's default)."""
    head_json: str | None = None
    """The last recorded head (`session_head.StoredHead` JSON); None for sessions recorded before
    heads were kept."""

    @property
    def model_spec(self) -> str | None:
        """The model the session moved to last, if it ever moved."""
        return self.model_specs[-1] if self.model_specs else None


def read_transcript(entries: list[MessageRecord]) -> StoredTranscript:
    """Rebuild a transcript from its stored entries (in `seq` order, without gaps)."""
    messages: list[UserMessage | AssistantMessage] = []
    model_specs: list[str] = []
    model_reasons: list[str] = []
    effort: str | None = None
    head_json: str | None = None
    for expected, entry in enumerate(entries):
        where = f"entry {entry.seq} ({entry.kind}) of session {entry.session_id}"
        if entry.seq != expected:
            raise StoredTranscriptError(f"{where}: expected entry {expected}; the stored transcript has a gap")
        try:
            if entry.kind in (KIND_USER, KIND_ASSISTANT):
                message = _MESSAGE.validate_json(entry.body)
                if message.role != entry.kind:
                    raise StoredTranscriptError(f"{where}: holds a {message.role} message")
                messages.append(message)
            elif entry.kind == KIND_CONTEXT:
                block = ContextBlock.model_validate_json(entry.body)
                if not messages or not isinstance(messages[-1], UserMessage):
                    raise StoredTranscriptError(f"{where}: a context block must follow a user message")
                messages[-1] = UserMessage(content=messages[-1].content + (block,))
            elif entry.kind == KIND_COMPACTION:
                # The same step the live session took: the summary first, the kept turns after it.
                body = json.loads(entry.body)
                keep_from = int(body["keep_from"])
                kept = Transcript(messages=tuple(messages))
                plan = CompactionPlan(keep_from=keep_from, dropped_tokens=0, kept_tokens=0)
                messages = list(compacted(kept, plan, str(body["summary"])).messages)
            elif entry.kind == KIND_CLEARING:
                messages = _with_stubs(messages, json.loads(entry.body)["stubs"])
            elif entry.kind == KIND_EFFORT:
                value = json.loads(entry.body)["effort"]
                effort = str(value) if value is not None else None
            elif entry.kind == KIND_REWIND:
                keep = int(json.loads(entry.body)["keep"])
                if not 0 <= keep <= len(messages):
                    raise StoredTranscriptError(f"{where}: keeps {keep} of {len(messages)} messages")
                messages = messages[:keep]
            elif entry.kind == KIND_CONTINUED:
                more = AssistantMessage.model_validate_json(entry.body)
                if not messages or not isinstance(messages[-1], AssistantMessage):
                    raise StoredTranscriptError(f"{where}: a continuation must follow an assistant message")
                messages[-1] = AssistantMessage(content=messages[-1].content + more.content)
            elif entry.kind == KIND_HEAD:
                json.loads(entry.body)  # validated where it is used (session_head)
                head_json = entry.body
            elif entry.kind == KIND_MODEL:
                switch = json.loads(entry.body)
                model_specs.append(str(switch["spec"]))
                model_reasons.append(str(switch.get("reason") or ""))
            else:
                raise StoredTranscriptError(f"{where}: unknown kind of entry")
        except (ValidationError, TranscriptError, KeyError, IndexError, ValueError, json.JSONDecodeError) as exc:
            raise StoredTranscriptError(f"{where} cannot be read: {exc}") from exc
    try:
        transcript = Transcript(messages=tuple(messages))
    except (ValidationError, TranscriptError) as exc:
        session = entries[0].session_id if entries else "?"
        raise StoredTranscriptError(f"the stored transcript of session {session} breaks the conversation rules: {exc}") from exc
    return StoredTranscript(
        transcript=transcript, model_specs=tuple(model_specs), model_reasons=tuple(model_reasons), next_seq=len(entries),
        effort=effort,
        head_json=head_json,
    )
