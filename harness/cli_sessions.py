"""Recorded sessions as a person picks them: newest first, with their date, model and first
prompt, and an id that may be given by a unique prefix (as git takes a commit id)."""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from hitrate.store.ledger import GroupSummary, Ledger

SHORT_ID = 8
"""Fewest characters of an id shown in tables; `--json` has them whole, and `--resume` takes any
unique prefix."""


def short_id_length(ids: list[str]) -> int:
    """Characters that tell every id in `ids` apart (at least SHORT_ID), as git shortens commits:
    ids that start with a timestamp share their first characters."""
    n = SHORT_ID
    longest = max((len(i) for i in ids), default=0)
    while n < longest and len({i[:n] for i in ids}) < len(set(ids)):
        n += 1
    return n


class SessionLine(BaseModel):
    """One recorded session with what a person recognises it by."""

    model_config = ConfigDict(frozen=True)

    id: str
    started_at: datetime | None
    model: str | None
    first_prompt: str
    summary: GroupSummary | None = None
    """Its calls' totals (None for a session without calls)."""


class SessionLookupError(ValueError):
    """No session, or more than one, matches the id or prefix given; the message says which."""


def first_prompt(ledger: Ledger, session_id: str) -> str:
    """The text of the session's first user message, on one line ("" when none was stored)."""
    stored = ledger.messages(session_id, kind="user", limit=1)
    if not stored:
        return ""
    try:
        content = json.loads(stored[0].body).get("content") or []
    except (ValueError, AttributeError):
        return ""
    texts = [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
    return " ".join(" ".join(texts).split())


def recent_sessions(ledger: Ledger, *, since: datetime | None = None, limit: int | None = None) -> list[SessionLine]:
    """Sessions with calls, newest first (by their last call), at most `limit` of them."""
    groups = [g for g in ledger.summarize("session", since=since) if g.key is not None]
    groups.sort(key=lambda g: g.first_at or datetime.min, reverse=True)
    if limit:
        groups = groups[:limit]
    records = {s.id: s for s in ledger.sessions()}
    lines = []
    for group in groups:
        assert group.key is not None
        record = records.get(group.key)
        lines.append(SessionLine(
            id=group.key,
            # The first call's time, so that each session sits under the day its calls are counted in.
            started_at=group.first_at or (record.started_at if record else None),
            # A session row is written with its first call; calls merged from elsewhere may lack one.
            model=record.model if record else _model_of_calls(ledger, group.key),
            first_prompt=first_prompt(ledger, group.key),
            summary=group,
        ))  # fmt: skip
    return lines


def _model_of_calls(ledger: Ledger, session_id: str) -> str | None:
    calls = ledger.calls(session_id=session_id)
    return calls[0].model if calls else None


def resolve_session(ledger: Ledger, id_or_prefix: str) -> str:
    """The one session whose id is `id_or_prefix` or starts with it."""
    wanted = id_or_prefix.strip()
    if not wanted:
        raise SessionLookupError("give a session id (or its first characters)")
    ids = [s.id for s in ledger.sessions()]
    if wanted in ids:
        return wanted
    matches = [i for i in ids if i.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionLookupError(f"no session id starts with {wanted!r} in {ledger.path} (`hitrate ledger` lists them)")
    shown = ", ".join(m[: len(wanted) + 4] for m in matches[:5])
    raise SessionLookupError(f"{len(matches)} sessions start with {wanted!r} ({shown}…): give more characters")
