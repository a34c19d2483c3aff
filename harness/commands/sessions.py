"""Recorded sessions as a person picks them: newest first, with their date, model and first
prompt, and an id that may be given by a unique prefix (as git takes a commit id)."""

from __future__ import annotations

import json
from collections.abc import Iterable
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


def resolve_prefix(ids: Iterable[str], wanted: str, what: str, where: object) -> str:
    """The one id in `ids` that is `wanted` or starts with it (the shortened ids tables print).
    Raises SessionLookupError naming `what` ("session", "run") and `where` (the ledger)."""
    wanted = wanted.strip()
    if not wanted:
        raise SessionLookupError(f"give a {what} id (or its first characters)")
    known = list(dict.fromkeys(ids))
    if wanted in known:
        return wanted
    matches = [i for i in known if i.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionLookupError(f"no {what} id starts with {wanted!r} in {where} (`hitrate ledger` lists them)")
    shown = ", ".join(m[: len(wanted) + 4] for m in matches[:5])
    raise SessionLookupError(f"{len(matches)} {what}s start with {wanted!r} ({shown}…): give more characters")


def resolve_session(ledger: Ledger, id_or_prefix: str) -> str:
    """The one session whose id is `id_or_prefix` or starts with it."""
    return resolve_prefix((s.id for s in ledger.sessions()), id_or_prefix, "session", ledger.path)


def recorded_ids(ledger: Ledger, scope: str) -> list[str]:
    """Every id of `scope` ("run", "session", "task") the ledger has: its own rows and the ids its
    calls carry (calls merged from elsewhere may come without their run or session row)."""
    rows = {"run": ledger.runs, "session": ledger.sessions, "task": ledger.tasks}[scope]()
    return [r.id for r in rows] + [g.key for g in ledger.summarize(scope) if g.key is not None]  # type: ignore[arg-type]


def resolve_recorded_id(ledger: Ledger, id_or_prefix: str, scopes: tuple[str, ...] = ("run", "session", "task")) -> str:
    """The whole id of a run, session or task given its id or a unique prefix of it (what
    `hitrate ledger` prints); an id that is whole in one scope wins over prefixes in the others."""
    wanted = id_or_prefix.strip()
    ids = {scope: recorded_ids(ledger, scope) for scope in scopes}
    if any(wanted in found for found in ids.values()):
        return wanted
    what = ", ".join(scopes[:-1]) + f" or {scopes[-1]}" if len(scopes) > 1 else scopes[0]
    return resolve_prefix((i for found in ids.values() for i in found), wanted, what, ledger.path)
