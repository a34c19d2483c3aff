"""What a resumed session is rebuilt from: its ledger rows, read back.

- the transcript, from the stored entries (`transcript_log`);
- the running totals, from the session's call rows;
- the epochs, from the call rows too (`hitrate.harness.epochs`);
- the tool calls a killed process left unanswered, answered as interrupted with the next user turn
  (`interrupted_tool_results`);
- the last request, so that the first call after the resume is explained against it (a hit within
  the TTL, `ttl_expired` after a long gap), not as the first call of a session. The transcript
  stretch that request sent is projected again and checked against the row's section hashes. When
  they differ from some section on (the project docs were edited since, say), the sections from
  there on are known only by their stored hashes: a miss there is still explained as a prefix
  change in that section, without a line number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from pydantic import BaseModel, ConfigDict

from hitrate.harness.epochs import HEAD_SECTIONS
from hitrate.harness.models import ModelSpecError, spec_model_name
from hitrate.harness.transcript_log import KIND_MODEL, KIND_USER, StoredTranscript, StoredTranscriptError, read_transcript
from hitrate.projection.cache_view import session_so_far
from hitrate.projection.caching import CacheRules, family_for
from hitrate.projection.caching.family import CacheState
from hitrate.projection.docs import ProjectDoc
from hitrate.projection.explain import MissExplanation, explain_miss
from hitrate.projection.project import Projector, SystemPrompt
from hitrate.projection.prompt import Prompt
from hitrate.projection.tools_spec import ToolSpec
from hitrate.projection.transcript import AssistantMessage, TextBlock, ToolResultBlock, Transcript, UserMessage
from hitrate.store.ledger import Ledger
from hitrate.store.records import CallRecord, SessionRecord
from hitrate.store.usage import Usage

UNKNOWN_PATH = "changed since the session was saved"

INTERRUPTED_TOOL_RESULT = (
    "interrupted: the harness stopped while this tool was running, so its result was lost; whatever it "
    "changed may be partly done. Check before relying on it, or run it again."
)
"""The result of a tool call found unanswered when a session is continued."""


def interrupted_tool_results(transcript: Transcript) -> tuple[ToolResultBlock, ...]:
    """Results for tool calls nobody answered. A live session answers every call, even a cancelled
    one; the transcript ends with the model's tool calls only when the process died while they ran
    (`kill -9`, a crash, a power cut). Each is answered as interrupted, so the conversation is valid
    again and the model knows the tool's effects are uncertain."""
    last = transcript.messages[-1] if transcript.messages else None
    if not isinstance(last, AssistantMessage):
        return ()
    return tuple(ToolResultBlock(call_id=c.call_id, content=INTERRUPTED_TOOL_RESULT, is_error=True) for c in last.tool_calls)


class SessionNotResumable(KeyError):
    """No session with that id, or one without a stored transcript."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "session cannot be resumed"


@dataclass(frozen=True)
class StoredSession:
    record: SessionRecord
    stored: StoredTranscript
    calls: list[CallRecord]
    """The session's calls in the order they were made (failed ones included)."""


def load_session(ledger: Ledger, session_id: str) -> StoredSession:
    """The session row, its stored transcript and its calls; `SessionNotResumable` if there is no
    such session or it has no stored transcript, `StoredTranscriptError` if that cannot be read."""
    where = f"no saved transcript for session {session_id} in {ledger.path}"
    try:
        record = ledger.get_session(session_id)
    except KeyError:
        raise SessionNotResumable(f"{where}: no such session (`hitrate ledger` lists sessions)") from None
    entries = ledger.messages(session_id)
    if not entries:
        raise SessionNotResumable(f"{where}: it has no stored messages (never prompted, or recorded before transcripts were kept)")
    return StoredSession(record=record, stored=read_transcript(entries), calls=ledger.calls(session_id=session_id))


def stored_switches(stored: StoredTranscript) -> list[tuple[str, str]]:
    """(wire model name, reason) of each stored model switch, in order."""
    out: list[tuple[str, str]] = []
    for spec, reason in zip(stored.model_specs, stored.model_reasons):
        try:
            out.append((spec_model_name(spec), reason))
        except ModelSpecError:
            continue  # a spec this version no longer reads
    return out


def spec_labels(specs: Sequence[str | None]) -> dict[str, str]:
    """Wire model name -> the spec it was chosen with, for the specs a session used (later wins)."""
    labels: dict[str, str] = {}
    for spec in specs:
        if spec is None:
            continue
        try:
            labels[spec_model_name(spec)] = spec
        except ModelSpecError:
            continue  # a spec this version no longer reads: its epochs show the wire name
    return labels


@dataclass(frozen=True)
class PreviousRequest:
    """The last request that returned, to explain the next one's cache outcome against."""

    prompt: Prompt
    started_at: datetime
    unknown_from: int | None = None
    """Index of the first section whose bytes are known only by their stored hash (resumed
    sessions whose head changed since); None when every section is known."""


def previous_request(
    transcript: Transcript,
    call: CallRecord,
    *,
    rules: CacheRules,
    session_id: str,
    tools: Sequence[ToolSpec],
    system: SystemPrompt | str,
    docs: Sequence[ProjectDoc],
) -> PreviousRequest | None:
    """The request `call` sent, projected again from the transcript stretch it carried; None when
    no stretch of the transcript has that request's number of sections."""
    hashes = call.section_hashes
    if len(hashes) < HEAD_SECTIONS:
        return None

    def project(messages: Transcript) -> Prompt:
        return Projector(rules, session_id=session_id).project(
            model=call.model, tools=tools, system=system, transcript=messages, docs=docs, context=None, rules=rules
        )

    # The request ended with a user message (its frozen context last); find the one after which
    # the request's section count is reached.
    per_message: dict[int, int] = {}
    for section in project(transcript).sections[HEAD_SECTIONS:]:
        if section.message_index is not None:
            per_message[section.message_index] = per_message.get(section.message_index, 0) + 1
    count, end = HEAD_SECTIONS, None
    for index, message in enumerate(transcript.messages):
        count += per_message.get(index, 0)
        if count == len(hashes) and isinstance(message, UserMessage):
            end = index
            break
        if count > len(hashes):
            break
    if end is None:
        return None
    prompt = project(Transcript(messages=transcript.messages[: end + 1]))
    got = prompt.section_hashes()
    unknown = next((i for i, (a, b) in enumerate(zip(got, hashes)) if a != b), None)
    if unknown is not None:
        # Sections from here on are the stored request's only by hash: their bytes are not known.
        sections = list(prompt.sections)
        for i in range(unknown, len(sections)):
            parent = hashes[i - 1] if i else sections[i].parent_hash
            sections[i] = sections[i].model_copy(update={"hash": hashes[i], "parent_hash": parent, "data": b""})
        prompt = prompt.model_copy(update={"sections": tuple(sections)})
    return PreviousRequest(prompt=prompt, started_at=call.started_at, unknown_from=unknown)


def explain_against(
    previous: PreviousRequest | None,
    prompt: Prompt,
    *,
    started_at: datetime,
    rules: CacheRules,
    usage: Usage,
    cache: CacheState | None = None,
) -> MissExplanation:
    """The cache outcome of `prompt` (sent at `started_at`, answered with `usage`) against the
    previous request of its session (`explain_miss`), stepping `cache` (the session's cache state,
    see `session_cache`) with it. A prefix change inside sections known only by
    their stored hash is labelled without a line or path."""
    explanation = explain_miss(
        previous.prompt if previous is not None else None,
        prompt,
        seconds_since_previous=(started_at - previous.started_at).total_seconds() if previous is not None else 0.0,
        previous_model=previous.prompt.model if previous is not None else prompt.model,
        current_model=prompt.model,
        rules=rules,
        reported_cache_read=usage.cache_read,
        reported_prompt_tokens=usage.prompt_tokens,
        cache=cache,
        started_at=started_at,
    )
    if previous is None or previous.unknown_from is None or explanation.reason != "prefix_changed":
        return explanation
    first_diff = next((i for i, (a, b) in enumerate(zip(previous.prompt.sections, prompt.sections)) if a.hash != b.hash), 0)
    if first_diff < previous.unknown_from:
        return explanation  # the change is in bytes that are known: its location is exact
    where = f"history[{explanation.section_index}]" if explanation.section_kind == "history" else explanation.section_kind
    return explanation.model_copy(
        update={"label": f"prefix_changed({where}, {UNKNOWN_PATH})", "path": UNKNOWN_PATH, "detail": f"{where} {UNKNOWN_PATH}"}
    )


def session_cache(rules: CacheRules, previous: PreviousRequest | None) -> CacheState:
    """A fresh cache of the rules' family holding what the session's requests so far left in it,
    as far as the last request shows them (after a resume or a model switch, that is all we know)."""
    cache = family_for(rules).cache()
    if previous is not None:
        for request in session_so_far(previous.prompt, started_at=previous.started_at.timestamp()):
            cache.step(request)
    return cache


class ResumableSession(BaseModel):
    """A session that can be resumed, as a list shows it."""

    model_config = ConfigDict(frozen=True)

    id: str
    started_at: datetime
    label: str | None
    model_spec: str | None
    """The model the session last used."""
    workspace: str | None
    calls: int
    cost_usd: float | None
    first_prompt: str


def resumable_sessions(ledger: Ledger, *, limit: int = 10, exclude: Sequence[str] = ()) -> list[ResumableSession]:
    """The most recent sessions with a stored transcript, newest first."""
    found: list[ResumableSession] = []
    for record in reversed(ledger.sessions(with_messages=True)):
        if record.id in exclude:
            continue
        first = ledger.messages(record.id, kind=KIND_USER, limit=1)
        text = ""
        try:
            if first:
                message = UserMessage.model_validate_json(first[0].body)
                text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        except ValueError:
            text = "(unreadable)"
        switches = ledger.messages(record.id, kind=KIND_MODEL)
        try:
            spec = json.loads(switches[-1].body)["spec"] if switches else record.model_spec
        except (ValueError, KeyError):
            spec = record.model_spec
        totals = ledger.totals(session_id=record.id)
        found.append(
            ResumableSession(
                id=record.id,
                started_at=record.started_at,
                label=record.label,
                model_spec=spec,
                workspace=record.workspace,
                calls=totals.calls,
                cost_usd=totals.cost_usd,
                first_prompt=text,
            )
        )
        if len(found) >= limit:
            break
    return found
